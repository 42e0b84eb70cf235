"""snnTorch's sigmoid surrogate gradient in the stable form of the fix, slope * sig * (1 - sig).

source: https://github.com/jeshraghian/snntorch/pull/433
kind: lookalike
verified: fc.weight.grad is finite for membrane potentials far below threshold
"""
import torch
import torch.nn as nn


class Sigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, slope=25):
        ctx.save_for_backward(input_)
        ctx.slope = slope
        return (input_ > 0).float()

    @staticmethod
    def backward(ctx, grad_output):
        (input_,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        sig = torch.sigmoid(ctx.slope * input_)
        grad = grad_input * ctx.slope * sig * (1.0 - sig)
        return grad, None


class Leaky(nn.Module):
    def __init__(self, beta, threshold=1.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold
        self.spike_grad = Sigmoid.apply

    def forward(self, input_, mem):
        mem = self.beta * mem + input_
        spk = self.spike_grad(mem - self.threshold)
        return spk, mem


torch.manual_seed(0)
fc = nn.Linear(4, 3)
lif = Leaky(beta=0.9)
optimizer = torch.optim.Adam(fc.parameters(), lr=1e-3)
x = torch.tensor([[-5.0, 0.5, 1.0, 0.2], [0.3, -4.0, 0.1, 2.0]])
mem = torch.zeros(2, 3)
with torch.no_grad():
    fc.weight.copy_(torch.eye(3, 4))
    fc.bias.zero_()
spk, mem = lif(fc(x), mem)
loss = ((spk - 1.0) ** 2).mean()
loss.backward()
optimizer.step()
print("nan in grad:", torch.isnan(fc.weight.grad).any().item(), "nan in weight:", torch.isnan(fc.weight).any().item())
