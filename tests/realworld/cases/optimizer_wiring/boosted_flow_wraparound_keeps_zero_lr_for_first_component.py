"""A gradient-boosted normalizing flow trains one component at a time with a single optimizer holding one parameter group per component, whose learning rates the helper `increment_boosted_component` sets (the active component gets the learning rate, the others 0); when the last component converges the helper wraps around to component 0 for a second pass but only updates the learning rates in its other branch, so component 0 is retrained with learning rate 0 and its second pass changes nothing, silently.

source: https://github.com/robert-giaquinto/gradient-boosted-normalizing-flows/commit/e86b61f5017fabc28a23417277ce836453850fb6
kind: bug
symptom: silent
verified: during the second pass over component 0 its weights do not move (max abs weight change 0) although the loss has a gradient for them (gradient norm 0.39); the look-alike moves them by 0.19
"""
import math

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

LR, ITERS_PER_COMPONENT = 5e-3, 40


class PlanarFlow(nn.Module):
    def __init__(self, dim=2):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim) * 0.1)
        self.u = nn.Parameter(torch.randn(dim) * 0.1)
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, z):
        lin = z @ self.w + self.b
        out = z + self.u * torch.tanh(lin)[:, None]
        psi = (1 - torch.tanh(lin) ** 2)[:, None] * self.w
        return out, torch.log((1 + psi @ self.u).abs() + 1e-6)


class BoostedFlow(nn.Module):
    def __init__(self, num_components=3):
        super().__init__()
        self.num_components = num_components
        self.flows = nn.ModuleList(PlanarFlow() for _ in range(num_components))
        self.component = 0
        self.all_trained = False

    def log_density(self, x):
        z, log_det = self.flows[self.component](x)
        return -0.5 * (z ** 2).sum(1) - math.log(2 * math.pi) + log_det


def increment_boosted_component(model, optimizer):
    if model.component == model.num_components - 1:
        model.component = 0
        model.all_trained = True
    else:
        model.component = min(model.component + 1, model.num_components - 1)
        for c in range(model.num_components):
            optimizer.param_groups[c]["lr"] = LR if c == model.component else 0.0  # ROOT
    return optimizer


def sample_target(n):
    angle = torch.rand(n) * 2 * math.pi
    return torch.stack([2 * angle.cos(), 2 * angle.sin()], 1) + 0.3 * torch.randn(n, 2)


model = BoostedFlow()
optimizer = torch.optim.Adam([{"params": f.parameters()} for f in model.flows], lr=LR)
for c in range(model.num_components):
    optimizer.param_groups[c]["lr"] = LR if c == model.component else 0.0

before = None
for batch_id in range(1, ITERS_PER_COMPONENT * (model.num_components + 1) + 1):
    if model.all_trained and model.component == 0 and before is None:
        before = [p.detach().clone() for p in model.flows[0].parameters()]
        probe = -model.log_density(sample_target(256)).mean()
        probe_grad = torch.autograd.grad(probe, list(model.flows[0].parameters()))
    loss = -model.log_density(sample_target(256)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if batch_id % ITERS_PER_COMPONENT == 0:
        print(f"batch {batch_id}: component {model.component} loss {loss.item():.3f}")
        optimizer = increment_boosted_component(model, optimizer)

moved = max((p.detach() - b).abs().max().item() for p, b in zip(model.flows[0].parameters(), before))
grad_norm = torch.cat([g.flatten() for g in probe_grad]).norm().item()
print(f"second pass over component 0: max abs weight change {moved:.3g} (gradient norm {grad_norm:.2f})")
