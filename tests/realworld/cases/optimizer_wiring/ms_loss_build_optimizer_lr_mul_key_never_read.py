"""Metric-learning solver puts an 'lr_mul' entry in each param group for the backbone; torch.optim never reads it.

source: https://github.com/msight-tech/research-ms-loss/issues/27
kind: bug
symptom: silent
verified: every param group, backbone included, trains at lr 0.01; the intended backbone lr 0.001 is never applied
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class cfg:
    class SOLVER:
        OPTIMIZER_NAME = "SGD"
        BASE_LR = 0.01
        WEIGHT_DECAY = 5e-4


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
        self.head = nn.Linear(64, 16)

    def forward(self, x):
        return nn.functional.normalize(self.head(self.backbone(x)), dim=1)


def build_optimizer(cfg, model):
    params = []
    for key, value in model.named_parameters():
        if not value.requires_grad:
            continue
        lr_mul = 1.0
        if "backbone" in key:
            lr_mul = 0.1
        params += [{"params": [value], "lr_mul": lr_mul}]  # ROOT
    optimizer = getattr(torch.optim, cfg.SOLVER.OPTIMIZER_NAME)(params, lr=cfg.SOLVER.BASE_LR,
                                                                weight_decay=cfg.SOLVER.WEIGHT_DECAY)
    return optimizer


model = Embedder()
optimizer = build_optimizer(cfg, model)
for step in range(3):
    x = torch.randn(16, 32)
    emb = model(x)
    sim = emb @ emb.t()
    loss = (sim - torch.eye(16)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print([g["lr"] for g in optimizer.param_groups])
