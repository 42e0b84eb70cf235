"""Adaptive Soft Contrastive Learning with model=byol: the BYOL loss is returned per sample and backpropagated as is.

source: https://github.com/MrChenFeng/Adaptive-Soft-Contrastive-Learning_ICPR2022/issues/2
kind: bug
symptom: crash
verified: grad can be implicitly created only for scalar outputs
"""
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F


def byol_loss_fn(p, z):
    p = F.normalize(p, dim=-1)
    z = F.normalize(z, dim=-1)
    return 2 - 2 * (p * z.detach()).sum(dim=-1)  # ROOT


class BYOL(nn.Module):
    def __init__(self, dim=16, momentum=0.99):
        super().__init__()
        self.online = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, dim))
        self.predictor = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, dim))
        self.target = copy.deepcopy(self.online)
        for p in self.target.parameters():
            p.requires_grad = False
        self.m = momentum

    @torch.no_grad()
    def update_target(self):
        for po, pt in zip(self.online.parameters(), self.target.parameters()):
            pt.mul_(self.m).add_(po, alpha=1 - self.m)

    def forward(self, x1, x2):
        p1, p2 = self.predictor(self.online(x1)), self.predictor(self.online(x2))
        with torch.no_grad():
            z1, z2 = self.target(x1), self.target(x2)
        return byol_loss_fn(p1, z2) + byol_loss_fn(p2, z1)


torch.manual_seed(0)
model = BYOL()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for x in [torch.randn(8, 32) for _ in range(2)]:
    x1, x2 = x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)
    loss = model(x1, x2)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
    model.update_target()
