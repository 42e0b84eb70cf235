"""BadCustomFunction keeps the intermediate `interm = inp * 2` on ctx.foo and uses it in backward; interm was computed without autograd in forward, so a gradient penalty built with create_graph=True misses the second-order term through it.

source: https://github.com/pytorch/pytorch/issues/58509
kind: bug
symptom: silent
verified: gradcheck passes but gradgradcheck fails; the gradient penalty's gradient on the linear layer's weight is 6.3 at most (max abs) where the same function written with save_for_backward(inp) and interm recomputed in backward gives up to 126; they differ by 127 (max abs)
"""
import torch
from torch import autograd


class BadCustomFunction(autograd.Function):
    @staticmethod
    def forward(ctx, inp):
        interm = inp * 2
        ctx.foo = interm  # ROOT
        res = interm ** 2
        return res

    @staticmethod
    def backward(ctx, gres):
        grad = 2 * 2 * ctx.foo * gres
        return grad


torch.manual_seed(0)
inp = torch.rand(2, dtype=torch.double, requires_grad=True)
assert autograd.gradcheck(BadCustomFunction.apply, inp)
layer = torch.nn.Linear(3, 2).double()
x = torch.rand(4, 3, dtype=torch.double, requires_grad=True)
out = BadCustomFunction.apply(layer(x)).sum()
g, = autograd.grad(out, x, create_graph=True)
penalty = g.pow(2).sum()
penalty.backward()
print(layer.weight.grad)
