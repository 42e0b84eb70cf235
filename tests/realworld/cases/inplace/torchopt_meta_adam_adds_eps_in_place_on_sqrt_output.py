"""torchopt's differentiable Adam (MetaAdam) computes its update with `m.div(v.add(eps_root).sqrt_().add_(eps))`: the in-place add_ of eps changes the output of sqrt_, which sqrt's backward needs, so differentiating the outer (meta) loss through the inner Adam steps fails.

source: https://github.com/metaopt/torchopt/commit/f39849353e459172d90673868bb7d7d78bc3eb68
kind: bug
symptom: crash
verified: which is output 0 of Sqrt, is at version 2; expected version 1 instead
"""
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class ScaleByAdamState(NamedTuple):
    mu: tuple
    nu: tuple
    count: tuple


def _update_moment(updates, moments, decay, *, order):  # the inplace=False branch
    if order == 2:
        def f(g, t):
            return t.mul(decay).addcmul_(g, g, value=1 - decay) if g is not None else t
    else:
        def f(g, t):
            return t.mul(decay).add_(g, alpha=1 - decay) if g is not None else t
    return tuple(map(f, updates, moments))


def _bias_correction(moment, decay, count):
    return tuple(t.div(1 - decay ** c) for t, c in zip(moment, count))


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, moment_requires_grad=True):
    def init_fn(params):
        zero = tuple(torch.zeros(1, dtype=torch.int32).squeeze_() for t in params)
        mu = tuple(torch.zeros_like(t, requires_grad=moment_requires_grad) for t in params)
        nu = tuple(torch.zeros_like(t, requires_grad=moment_requires_grad) for t in params)
        return ScaleByAdamState(mu=mu, nu=nu, count=zero)

    def update_fn(updates, state, *, params=None, inplace=True):
        mu = _update_moment(updates, state.mu, b1, order=1)
        nu = _update_moment(updates, state.nu, b2, order=2)
        count_inc = tuple(c + 1 for c in state.count)
        mu_hat = _bias_correction(mu, b1, count_inc)
        nu_hat = _bias_correction(nu, b2, count_inc)

        def f(g, m, v):
            return m.div(v.add(eps_root).sqrt_().add_(eps)) if g is not None else None  # ROOT

        updates = tuple(map(f, updates, mu_hat, nu_hat))
        return updates, ScaleByAdamState(mu=mu, nu=nu, count=count_inc)

    return init_fn, update_fn


class MetaAdam:  # MetaOptimizer(chain(scale_by_adam, scale(-lr))) for one module
    def __init__(self, net, lr=1e-3):
        self.net, self.lr = net, lr
        self.init_fn, self.update_fn = scale_by_adam()
        self.state = self.init_fn(tuple(net.parameters()))

    def step(self, loss):
        names, flattened_params = zip(*self.net.named_parameters())
        grads = torch.autograd.grad(loss, flattened_params, create_graph=True, allow_unused=True)
        updates, self.state = self.update_fn(grads, self.state, params=flattened_params, inplace=False)
        for name, p, u in zip(names, flattened_params, updates):
            module_name, _, attr = name.rpartition(".")
            self.net.get_submodule(module_name)._parameters[attr] = p + (-self.lr) * u


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
meta_optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
for outer_step in range(2):
    net_state = {n: p for n, p in net.named_parameters()}  # torchopt.extract_state_dict
    inner_optimizer = MetaAdam(net, lr=0.1)
    x_support, y_support, x_query, y_query = torch.randn(10, 4), torch.randn(10, 1), torch.randn(10, 4), torch.randn(10, 1)
    for inner_step in range(2):
        inner_optimizer.step(F.mse_loss(net(x_support), y_support))
    outer_loss = F.mse_loss(net(x_query), y_query)
    meta_optimizer.zero_grad()
    outer_loss.backward()  # SYMPTOM
    meta_optimizer.step()
    for name, p in net_state.items():  # torchopt.recover_state_dict
        module_name, _, attr = name.rpartition(".")
        net.get_submodule(module_name)._parameters[attr] = p
    print(outer_step, round(outer_loss.item(), 4))
