"""pytorch_wavelets SFB1D (1D synthesis filter bank) custom Function: backward computes dlow and dhigh only under `if ctx.needs_input_grad[0]`, so when the lowpass input does not require grad but the highpass input does, backward returns None for it and the layer producing the highpass coefficients gets no gradient.

source: https://github.com/fbcotter/pytorch_wavelets/issues/65
kind: bug
symptom: silent
verified: needs_input_grad is (False, True, False, False, False); the highpass branch's conv weight has .grad None after backward and never changes
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function


def sfb1d(lo, hi, g0, g1):
    return F.conv_transpose1d(lo, g0, stride=2) + F.conv_transpose1d(hi, g1, stride=2)


def afb1d(x, h0, h1):
    return F.conv1d(x, h0, stride=2), F.conv1d(x, h1, stride=2)


class SFB1D(Function):
    @staticmethod
    def forward(ctx, low, high, g0, g1, mode):
        ctx.mode = mode
        ctx.save_for_backward(g0, g1)
        return sfb1d(low, high, g0, g1)

    @staticmethod
    def backward(ctx, dy):
        dlow, dhigh = None, None
        if ctx.needs_input_grad[0]:  # ROOT
            g0, g1 = ctx.saved_tensors
            dlow, dhigh = afb1d(dy, g0, g1)
        return dlow, dhigh, None, None, None


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.high_net = nn.Conv1d(1, 1, 3, padding=1)
        g = torch.tensor([[[0.7071, 0.7071]]])
        self.register_buffer('g0', g)
        self.register_buffer('g1', g * torch.tensor([1.0, -1.0]))

    def forward(self, low, high):
        return SFB1D.apply(low, self.high_net(high), self.g0, self.g1, 'zero')


torch.manual_seed(0)
dec = Decoder()
optimizer = torch.optim.SGD(dec.parameters(), lr=0.1)
w_before = dec.high_net.weight.detach().clone()
for step in range(3):
    low, high, target = torch.randn(4, 1, 8), torch.randn(4, 1, 8), torch.randn(4, 1, 16)
    loss = F.mse_loss(dec(low, high), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(dec.high_net.weight.grad, torch.equal(dec.high_net.weight, w_before))
