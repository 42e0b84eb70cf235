"""The answer's version of the inplace ReLU gradient check: x stays the leaf, F.relu_ runs on a clone x2, and the gradient is taken with respect to x, so a negative entry gets 0.

source: https://discuss.pytorch.org/t/understanding-autograd-relu-inplace-true/89031
kind: lookalike
verified: torch.autograd.grad(F.relu_(x2), (x,)) is tensor([0.]) for x = -1, as with the out-of-place relu
"""
import torch
import torch.nn.functional as F

x = torch.tensor([-1.0]).requires_grad_()
x2 = x.clone()
print(torch.autograd.grad(F.relu_(x2), (x,))[0])

x = torch.tensor([-1.0]).requires_grad_()
print(torch.autograd.grad(F.relu(x.clone()), (x,))[0])
