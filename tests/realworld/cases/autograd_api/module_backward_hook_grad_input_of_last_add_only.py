"""A module M(x, y, z) returning x + y + z registers a (non-full) backward hook to read the gradients of its three inputs; the legacy hook is attached to the last autograd node of the forward, the second add, so grad_input has two entries ((x + y) and z), not three.

source: https://github.com/pytorch/pytorch/issues/598
kind: bug
symptom: silent
verified: the hook receives len(grad_input) == 2 (torch warns that a non-full hook on a forward with several autograd nodes misses some grad_input); register_full_backward_hook gives 3 entries
"""
import torch
import torch.nn as nn

received = []


def bh(m, grad_input, grad_output):
    received.append(grad_input)


class M(nn.Module):
    def __init__(self):
        super(M, self).__init__()
        self.register_backward_hook(bh)  # ROOT

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
