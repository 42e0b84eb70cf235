"""Keeping a pretrained backbone fixed with a zero learning rate in its optimizer param group.

source: https://github.com/open-mmlab/mmdetection3d/issues/754
kind: lookalike
"""
import torch
import torch.nn as nn


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.new_branch = nn.Linear(8, 3)

    def forward(self, x):
        return self.new_branch(self.backbone(x))


def build_optimizer(model, cfg):
    groups = []
    for name, module in model.named_children():
        lr_mult = cfg['paramwise_cfg']['custom_keys'].get(name, {}).get('lr_mult', 1.0)
        groups.append({'params': module.parameters(), 'lr': cfg['lr'] * lr_mult})
    return torch.optim.SGD(groups, lr=cfg['lr'], momentum=0.9)


torch.manual_seed(0)
model = Detector()
optimizer = build_optimizer(model, {'lr': 0.01, 'paramwise_cfg': {'custom_keys': {'backbone': {'lr_mult': 0.0}}}})
x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
for _ in range(5):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
