"""The module M(x, y, z) registers its hook with register_full_backward_hook, which is attached to the module's inputs and outputs, so grad_input holds one gradient per input.

source: https://github.com/pytorch/pytorch/issues/598
kind: lookalike
verified: the hook receives 3 gradients of shape (1, 5)
"""
import torch
import torch.nn as nn

received = []


def bh(m, grad_input, grad_output):
    received.append(grad_input)


class M(nn.Module):
    def __init__(self):
        super(M, self).__init__()
        self.register_full_backward_hook(bh)

    def forward(self, x, y, z):
        return x + y + z


x = torch.randn(1, 5, requires_grad=True)
y = torch.randn(1, 5, requires_grad=True)
z = torch.randn(1, 5, requires_grad=True)

criterion = nn.MSELoss()
mod = M()
out = mod(x, y, z)
loss = criterion(out, torch.randn(1, 5))
loss.backward()
print(len(received[0]), [g.shape for g in received[0]])
