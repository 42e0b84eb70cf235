"""Overhaul distillation: the teacher runs in train mode (for BatchNorm) but its features are detached in the loss.

source: https://github.com/clovaai/overhaul-distillation/issues/37
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def distillation_loss(source, target, margin):
    target = torch.max(target, margin)
    loss = F.mse_loss(source, target, reduction="none")
    loss = loss * ((source > target) | (target > 0)).float()
    return loss.sum()


class Distiller(nn.Module):
    def __init__(self, t_net, s_net):
        super().__init__()
        self.t_net, self.s_net = t_net, s_net
        self.connector = nn.Conv2d(4, 8, 1)
        self.margin = torch.full((1, 8, 1, 1), -0.5)

    def forward(self, x):
        t_feat = self.t_net[:2](x)
        s_feat = self.s_net[:2](x)
        loss_distill = distillation_loss(self.connector(s_feat), t_feat.detach(), self.margin)
        return self.s_net[2:](s_feat), loss_distill


torch.manual_seed(0)
t_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
s_net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
d_net = Distiller(t_net, s_net)
optimizer = torch.optim.SGD([{'params': s_net.parameters()}, {'params': d_net.connector.parameters()}], lr=0.1)
d_net.train()
d_net.s_net.train()
d_net.t_net.train()
for inputs, targets in [(torch.rand(4, 3, 8, 8), torch.randint(0, 5, (4,))) for _ in range(3)]:
    outputs, loss_distill = d_net(inputs)
    loss = F.cross_entropy(outputs, targets) + loss_distill.sum() / inputs.size(0) / 1000
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
