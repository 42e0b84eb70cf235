"""FAMO.backward clips the shared parameters' gradients with clip_grad_norm_ before calling loss.backward(), when they hold nothing yet, so the weighted multi-task gradient reaches optimizer.step() unclipped.

source: https://github.com/Cranial-XIX/FAMO/issues/4
kind: bug
symptom: silent
verified: with max_norm=1.0 the shared-parameter gradient norm at optimizer.step() is 38.2, 56.2, 74.4 over 3 steps (never clipped); clipping after loss.backward() gives 1.0 each step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FAMO:
    def __init__(self, n_tasks, max_norm=1.0, w_lr=0.025):
        self.n_tasks = n_tasks
        self.max_norm = max_norm
        self.w = torch.zeros(n_tasks, requires_grad=True)
        self.w_opt = torch.optim.Adam([self.w], lr=w_lr)
        self.min_losses = torch.zeros(n_tasks)

    def get_weighted_loss(self, losses):
        z = F.softmax(self.w, -1)
        D = losses - self.min_losses + 1e-8
        c = (z / D).sum().detach()
        return (D.log() * z / c).sum()

    def backward(self, losses, shared_parameters=None):
        loss = self.get_weighted_loss(losses=losses)
        if self.max_norm > 0 and shared_parameters is not None:
            torch.nn.utils.clip_grad_norm_(shared_parameters, self.max_norm)  # ROOT
        loss.backward()
        return loss


torch.manual_seed(0)
shared = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
heads = nn.ModuleList([nn.Linear(32, 1) for _ in range(3)])
optimizer = torch.optim.SGD(list(shared.parameters()) + list(heads.parameters()), lr=0.01)
weight_method = FAMO(n_tasks=3, max_norm=1.0)
for step in range(3):
    x, ys = torch.randn(16, 8) * 10, torch.randn(3, 16, 1) * 10
    feats = shared(x)
    losses = torch.stack([F.mse_loss(h(feats), y) for h, y in zip(heads, ys)])
    optimizer.zero_grad()
    weight_method.backward(losses=losses, shared_parameters=list(shared.parameters()))
    norm = torch.norm(torch.stack([p.grad.norm() for p in shared.parameters()]))
    optimizer.step()
    print(step, norm.item())
