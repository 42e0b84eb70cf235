import torch
import torch.nn as nn


class ScaleGrad(torch.autograd.Function):
    """Identity forward; scales the gradient on the way back."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * ctx.scale  # ROOT


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 1)

    def forward(self, x):
        return self.out(ScaleGrad.apply(self.enc(x), 0.5))


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(4, 6), torch.randn(4, 1)
loss = ((net(x) - y) ** 2).mean()
opt.zero_grad()
loss.backward()
opt.step()
