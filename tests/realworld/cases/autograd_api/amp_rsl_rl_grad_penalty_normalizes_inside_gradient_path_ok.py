"""amp-rsl-rl's gradient penalty after its fix: `compute_loss` hands the raw expert states to `compute_grad_pen`, which makes the autograd leaf on the raw states and applies the empirical normaliser inside the gradient computation, so `autograd.grad` measures the discriminator's slope with respect to the raw states, normaliser Jacobian included.

source: https://github.com/gbionics/amp-rsl-rl/pull/58
kind: lookalike
"""
import torch
from torch import nn, autograd

torch.manual_seed(0)
torch.set_num_threads(1)

STATE = 6


class EmpiricalNormalization(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, x):
        return (x - self.mean) / self.std


class AMPDiscriminator(nn.Module):
    def __init__(self, normalizer, lambda_gp=10.0):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(2 * STATE, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.linear = nn.Linear(32, 1)
        self.amp_normalizer = normalizer
        self.lambda_gp = lambda_gp

    def forward(self, states):
        return self.linear(self.trunk(torch.cat(states, -1)))

    def compute_grad_pen(self, expert_states):
        data = torch.cat(expert_states, -1).detach().requires_grad_(True)
        scores = self(tuple(self.amp_normalizer(s) for s in data.split(STATE, -1)))
        grad = autograd.grad(scores.sum(), inputs=data, create_graph=True)[0]
        return self.lambda_gp * grad.pow(2).sum(-1).mean()

    def compute_loss(self, expert, policy):
        expert_d = self(tuple(self.amp_normalizer(s) for s in expert))
        policy_d = self(tuple(self.amp_normalizer(s) for s in policy))
        amp_loss = 0.5 * ((expert_d - 1).pow(2).mean() + (policy_d + 1).pow(2).mean())
        return amp_loss, self.compute_grad_pen(expert)


def raw_slope(disc, expert):
    x = torch.cat(expert, -1).requires_grad_(True)
    half = x.split(STATE, -1)
    scores = disc(tuple(disc.amp_normalizer(s) for s in half))
    return autograd.grad(scores.sum(), x)[0].pow(2).sum(-1).mean().item()


std = torch.tensor([0.05, 0.1, 0.2, 1.0, 2.0, 0.1])
normalizer = EmpiricalNormalization(torch.zeros(STATE), std)
disc = AMPDiscriminator(normalizer)
opt = torch.optim.Adam(disc.parameters(), lr=1e-3)
for step in range(60):
    expert = (torch.randn(64, STATE) * std, torch.randn(64, STATE) * std)
    policy = (torch.randn(64, STATE) * std + 0.1, torch.randn(64, STATE) * std + 0.1)
    amp_loss, grad_pen = disc.compute_loss(expert, policy)
    opt.zero_grad()
    (amp_loss + grad_pen).backward()
    opt.step()
print(f"penalty the loss used {grad_pen.item():.4g}; squared slope w.r.t. the raw states {raw_slope(disc, expert):.4g}")
