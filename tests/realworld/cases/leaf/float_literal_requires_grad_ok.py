"""The enable_grad documentation example with a float literal, as the maintainers fixed it.

source: https://github.com/pytorch/pytorch/issues/53466
kind: lookalike
verified: x.grad is tensor([2.])
"""
import torch

x = torch.tensor([1.], requires_grad=True)
with torch.no_grad():
    with torch.enable_grad():
        y = x * 2
y.backward()
print(x.grad)
