"""FFJORD's CNF with train_T=True registers sqrt_end_time as a parameter but builds the integration interval with torch.tensor([0.0, self.sqrt_end_time * self.sqrt_end_time]); torch.tensor copies the value into a new leaf, so the log-likelihood never sends a gradient to the end time and T is never trained.

source: https://github.com/rtqichen/ffjord/pull/4
kind: bug
symptom: silent
verified: after the negative log-likelihood's backward cnf.sqrt_end_time.grad is None (the dynamics weight gets 3.7186) and sqrt_end_time stays 1.0 over 5 Adam steps; with torch.stack of the two times (the fix) the end-time gradient is 0.2844 and sqrt_end_time moves to 0.995
"""
import math

import torch
import torch.nn as nn


def odeint(func, y0, t, steps=20):  # fixed-step Euler stand-in for torchdiffeq.odeint, differentiable in t
    dt = (t[1] - t[0]) / steps
    state, ts = y0, t[0]
    for _ in range(steps):
        derivs = func(ts, state)
        state = tuple(s + dt * d for s, d in zip(state, derivs))
        ts = ts + dt
    return tuple(torch.stack([s0, s1]) for s0, s1 in zip(y0, state))


class ODEfunc(nn.Module):  # linear dynamics: dz/dt = z W^T, d(log p)/dt = -trace(W)
    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, t, states):
        z, logpz = states
        return self.linear(z), -torch.diagonal(self.linear.weight).sum().expand_as(logpz)


class CNF(nn.Module):
    def __init__(self, odefunc, T=1.0, train_T=False):
        super(CNF, self).__init__()
        if train_T:
            self.register_parameter("sqrt_end_time", nn.Parameter(torch.sqrt(torch.tensor(T))))
        else:
            self.register_buffer("sqrt_end_time", torch.sqrt(torch.tensor(T)))
        self.odefunc = odefunc

    def forward(self, z, logpz=None, integration_times=None):
        _logpz = torch.zeros(z.shape[0], 1).to(z) if logpz is None else logpz
        if integration_times is None:
            integration_times = torch.tensor([0.0, self.sqrt_end_time * self.sqrt_end_time]).to(z)  # ROOT
        state_t = odeint(self.odefunc, (z, _logpz), integration_times.to(z))
        z_t, logpz_t = tuple(s[1] for s in state_t)
        return z_t, logpz_t


def standard_normal_logprob(z):
    return (-0.5 * math.log(2 * math.pi) - z.pow(2) / 2).sum(1, keepdim=True)


torch.manual_seed(0)
cnf = CNF(ODEfunc(2), T=1.0, train_T=True)
optimizer = torch.optim.Adam(cnf.parameters(), lr=1e-3)
x = torch.randn(64, 2) * torch.tensor([2.0, 0.5]) + 1.0
for itr in range(5):
    optimizer.zero_grad()
    z, delta_logp = cnf(x, torch.zeros(x.shape[0], 1))
    loss = -(standard_normal_logprob(z) - delta_logp).mean()
    loss.backward()
    if itr == 0:
        print("sqrt_end_time.grad:", cnf.sqrt_end_time.grad, "dynamics grad:", round(cnf.odefunc.linear.weight.grad.norm().item(), 4))
    optimizer.step()
print("sqrt_end_time after 5 steps:", round(cnf.sqrt_end_time.item(), 4))
