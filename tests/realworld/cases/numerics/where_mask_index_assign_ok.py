"""The clamp-like exp written with a mask and indexed assignment: the gradient stays finite.

source: https://github.com/pytorch/pytorch/issues/156212
kind: lookalike
verified: x.grad is tensor([2.7183, 0.]) and x moves after a step
"""
import torch

x_th = torch.tensor(10.0)
x = torch.tensor([1.0, 1e10], requires_grad=True)
b = torch.tensor(1.0)
opt = torch.optim.SGD([x], lr=0.01)

x_out = torch.ones_like(x)
x_out[x <= x_th] = torch.exp(x[x <= x_th])
x_out[~(x <= x_th)] = b
l = x_out.sum()
l.backward()
opt.step()
print(x_out, x.grad)
