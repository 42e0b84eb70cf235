"""ResNet-like residual_activation_inplace: F.relu_(x) rewrites x, so the name x now stands for the ReLU output and the gradient "with respect to x" is d(relu)/d(relu) = 1 instead of 0 for a negative entry.

source: https://discuss.pytorch.org/t/understanding-autograd-relu-inplace-true/89031
kind: bug
symptom: silent
verified: torch.autograd.grad(F.relu_(x), (x,)) is tensor([1.]) for x = -1; the out-of-place F.relu gives tensor([0.])
"""
import torch
import torch.nn.functional as F


def residual_activation_inplace(x, residual, activation, inplace):
    for r in residual:
        x += r
    return activation(x, inplace=inplace)


# not in place
x = torch.tensor([-1.0]).requires_grad_().clone()
print(torch.autograd.grad(F.relu(x), (x,))[0])

# inplace
x = torch.tensor([-1.0]).requires_grad_().clone()
print(torch.autograd.grad(F.relu_(x), (x,))[0])  # ROOT

x = torch.rand(3, 4) - 2.0
residual = [torch.rand(3, 4), torch.rand(3, 4)]
y = residual_activation_inplace(x, residual, F.relu, inplace=True)
print(y)
