"""The custom Function from the thread written as advised: it saves its input with save_for_backward and recomputes the intermediate in backward, so double backward (a gradient penalty with create_graph=True) sees the dependency on the input.

source: https://github.com/pytorch/pytorch/issues/58509
kind: lookalike
verified: gradcheck and gradgradcheck pass; the penalty reaches the linear layer's weight through the recomputed intermediate
"""
import torch
from torch import autograd


class GoodCustomFunction(autograd.Function):
    @staticmethod
    def forward(ctx, inp):
        ctx.save_for_backward(inp)
        interm = inp * 2
        res = interm ** 2
        return res

    @staticmethod
    def backward(ctx, gres):
        inp, = ctx.saved_tensors
        interm = inp * 2
        grad = 2 * 2 * interm * gres
        return grad


torch.manual_seed(0)
inp = torch.rand(2, dtype=torch.double, requires_grad=True)
assert autograd.gradcheck(GoodCustomFunction.apply, inp)
assert autograd.gradgradcheck(GoodCustomFunction.apply, inp)
layer = torch.nn.Linear(3, 2).double()
x = torch.rand(4, 3, dtype=torch.double, requires_grad=True)
out = GoodCustomFunction.apply(layer(x)).sum()
g, = autograd.grad(out, x, create_graph=True)
penalty = g.pow(2).sum()
penalty.backward()
print(layer.weight.grad)
