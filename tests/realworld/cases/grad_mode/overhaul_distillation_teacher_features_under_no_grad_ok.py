"""Overhaul distillation: the teacher's pre-ReLU features are computed under torch.no_grad() (teacher kept in train mode for its BN), while the student and its connectors train on the distillation loss.

source: https://github.com/clovaai/overhaul-distillation/issues/34
kind: lookalike
verified: every student and connector parameter gets a gradient; the teacher gets none
"""
import torch
import torch.nn as nn


def distillation_loss(source, target, margin):
    target = torch.max(target, margin)
    loss = torch.nn.functional.mse_loss(source, target, reduction="none")
    loss = loss * ((source > target) | (target > 0)).float()
    return loss.sum()


class Distiller(nn.Module):
    def __init__(self, t_net, s_net):
        super(Distiller, self).__init__()
        self.Connectors = nn.ModuleList([nn.Sequential(nn.Conv2d(4, 8, 1, bias=False), nn.BatchNorm2d(8))])
        self.t_net, self.s_net = t_net, s_net
        self.margin = torch.full((1, 8, 1, 1), -0.5)

    def forward(self, x):
        with torch.no_grad():
            t_feat = self.t_net[0](x)
        s_feat = self.s_net[0](x)
        s_out = self.s_net[1:](torch.relu(s_feat))
        loss_distill = distillation_loss(self.Connectors[0](s_feat), t_feat.detach(), self.margin) / 1000
        return s_out, loss_distill


torch.manual_seed(0)
t_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
s_net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
d_net = Distiller(t_net, s_net)
t_net.train()
optimizer = torch.optim.SGD([{'params': s_net.parameters()}, {'params': d_net.Connectors.parameters()}], lr=0.1,
                            momentum=0.9, weight_decay=1e-4, nesterov=True)
inputs, targets = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
outputs, loss_distill = d_net(inputs)
loss = nn.functional.cross_entropy(outputs, targets) + loss_distill.sum() / 4 * 1e-4
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(all(p.grad is not None for p in s_net.parameters()), all(p.grad is None for p in t_net.parameters()))
