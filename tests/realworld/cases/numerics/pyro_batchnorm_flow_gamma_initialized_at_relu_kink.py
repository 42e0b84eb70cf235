"""Pyro's BatchNorm flow transform keeps its scale positive with `relu(gamma) + 1e-6`, but `__init__` creates `gamma` as `torch.zeros(input_dim)`: relu's gradient at exactly 0 is 0, so the flow's log-likelihood gives `gamma` a zero gradient at every step and the scale stays at 1e-6 while only `beta` learns.

source: https://github.com/pyro-ppl/pyro/pull/2459
kind: bug
symptom: silent
verified: gamma.grad is exactly 0 at every step, gamma never moves and the NLL after 100 steps is about 29.5 (2.85 with gamma started at 1)
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal, Transform, TransformedDistribution, constraints


class TransformModule(Transform, nn.Module):
    def __init__(self):
        super().__init__()

    __hash__ = nn.Module.__hash__


class BatchNorm(TransformModule):
    domain = constraints.real
    codomain = constraints.real
    bijective = True

    def __init__(self, input_dim, momentum=0.1, epsilon=1e-5):
        super().__init__()
        self.input_dim = input_dim
        self.gamma = nn.Parameter(torch.zeros(input_dim))  # ROOT
        self.beta = nn.Parameter(torch.zeros(input_dim))
        self.momentum = momentum
        self.epsilon = epsilon
        self.register_buffer("moving_mean", torch.zeros(input_dim))
        self.register_buffer("moving_variance", torch.ones(input_dim))

    @property
    def constrained_gamma(self):
        return F.relu(self.gamma) + 1e-6

    def _call(self, x):
        return (x - self.beta) / self.constrained_gamma * \
            torch.sqrt(self.moving_variance + self.epsilon) + self.moving_mean

    def _inverse(self, y):
        if self.training:
            mean, var = y.mean(0), y.var(0)
            with torch.no_grad():
                self.moving_mean.mul_(1 - self.momentum).add_(mean * self.momentum)
                self.moving_variance.mul_(1 - self.momentum).add_(var * self.momentum)
        else:
            mean, var = self.moving_mean, self.moving_variance
        return (y - mean) * self.constrained_gamma / torch.sqrt(var + self.epsilon) + self.beta

    def log_abs_det_jacobian(self, x, y):
        if self.training:
            var = torch.var(y, dim=0, keepdim=True)
        else:
            var = self.moving_variance
        return -self.constrained_gamma.log() + 0.5 * torch.log(var + self.epsilon)


torch.manual_seed(0)
data = torch.randn(256, 2) * torch.tensor([2.0, 0.5]) + torch.tensor([1.0, -1.0])
bn = BatchNorm(2)
base = Normal(torch.zeros(2), torch.ones(2))
flow_dist = TransformedDistribution(base, [bn])
optimizer = torch.optim.Adam(bn.parameters(), lr=0.05)
gamma_before = bn.gamma.detach().clone()
for step in range(100):
    optimizer.zero_grad()
    loss = -flow_dist.log_prob(data).sum(-1).mean()
    loss.backward()
    optimizer.step()
print(f"final NLL {loss.item():.3f}")
print("gamma grad:", bn.gamma.grad.tolist(), "beta:", [round(v, 3) for v in bn.beta.tolist()])
print("gamma moved:", not torch.equal(bn.gamma.detach(), gamma_before))
