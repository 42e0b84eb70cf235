"""Pyro 0.3's `pyro.module` registers every `named_parameters()` entry in the ParamStore, and `ParamStore.__setitem__` calls `requires_grad_(True)` on the stored (unconstrained) value, which for a real-valued parameter is the module's Parameter itself: a layer the user froze with `requires_grad=False` becomes trainable again and SVI's per-parameter optimizers update it.

source: https://github.com/pyro-ppl/pyro/pull/1779
kind: bug
symptom: silent
verified: after 30 steps the frozen features layer has requires_grad True and its weight moved by about 0.29 (0.0 with the fix)
"""
import torch
from torch import nn
from torch.distributions import constraints, transform_to

_MODULE_NAMESPACE_DIVIDER = "$$$"


class ParamStoreDict:
    def __init__(self):
        self._params = {}
        self._constraints = {}

    def __contains__(self, name):
        return name in self._params

    def __getitem__(self, name):
        return transform_to(self._constraints[name])(self._params[name])

    def __setitem__(self, name, new_constrained_value):
        constraint = self._constraints.setdefault(name, constraints.real)
        with torch.no_grad():
            unconstrained_value = transform_to(constraint).inv(new_constrained_value)
            unconstrained_value = unconstrained_value.contiguous()
        unconstrained_value.requires_grad_(True)
        self._params[name] = unconstrained_value

    def setdefault(self, name, init_constrained_value, constraint=constraints.real):
        if name not in self._params:
            self._constraints[name] = constraint
            self[name] = init_constrained_value
        return self[name]

    def unconstrained_values(self):
        return list(self._params.values())


_PYRO_PARAM_STORE = ParamStoreDict()


def param(name, init_tensor=None, constraint=constraints.real):
    if init_tensor is None:
        return _PYRO_PARAM_STORE[name]
    return _PYRO_PARAM_STORE.setdefault(name, init_tensor, constraint)


def module(name, nn_module):
    """Registers the module's parameters with the ParamStore."""
    for param_name, param_value in nn_module.named_parameters():
        full_param_name = name + _MODULE_NAMESPACE_DIVIDER + param_name
        param(full_param_name, param_value)  # ROOT
    return nn_module


class PyroOptim:
    """One torch optimizer per parameter, created the first time the parameter is seen."""

    def __init__(self, optim_constructor, optim_args):
        self.pt_optim_constructor = optim_constructor
        self.pt_optim_args = optim_args
        self.optim_objs = {}

    def __call__(self, params):
        for p in params:
            if p not in self.optim_objs:
                self.optim_objs[p] = self.pt_optim_constructor([p], **self.pt_optim_args)
            self.optim_objs[p].step()


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(3, 8)  # pretrained, to stay fixed
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.features(x))).squeeze(-1)


torch.manual_seed(0)
net = Regressor()
for p in net.features.parameters():
    p.requires_grad = False
frozen_before = net.features.weight.detach().clone()

x = torch.randn(64, 3)
y = x.sum(-1) + 0.1 * torch.randn(64)
sigma = 0.5


def model(x, y):
    regressor = module("regressor", net)
    mean = regressor(x)
    return -torch.distributions.Normal(mean, sigma).log_prob(y).sum()


optim = PyroOptim(torch.optim.Adam, {"lr": 0.01})
for step in range(30):
    loss = model(x, y)
    loss.backward()
    params = [p for p in _PYRO_PARAM_STORE.unconstrained_values() if p.grad is not None]
    optim(params)
    for p in params:
        p.grad = None

print("features.requires_grad after training:", net.features.weight.requires_grad)
print(f"frozen features weight moved by {(net.features.weight - frozen_before).abs().max().item():.4f}")
