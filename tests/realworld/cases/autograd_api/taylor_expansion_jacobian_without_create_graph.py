"""f(x, a) = g(a) + g'(a)(x - a) with g' from autograd.functional.jacobian: without create_graph, df/da drops the g'' term.

source: https://github.com/pytorch/pytorch/issues/103509
kind: bug
symptom: silent
verified: a.grad is 0 (the two g'(a) terms cancel) instead of 15 (with the g''(a)(x - a) term); no error is raised
"""
import torch


def g(a):
    return a ** 3


def f(x, a):
    g_prime = torch.autograd.functional.jacobian(g, a)  # ROOT
    return g(a) + g_prime * (x - a)


torch.manual_seed(0)
a = torch.ones(1, requires_grad=True)
x = torch.zeros(1)
optimizer = torch.optim.SGD([a], lr=0.01)
target = torch.full((1,), 0.5)
loss = ((f(x, a) - target) ** 2).sum() / 2
optimizer.zero_grad()
loss.backward()
print("a.grad:", a.grad)
optimizer.step()
