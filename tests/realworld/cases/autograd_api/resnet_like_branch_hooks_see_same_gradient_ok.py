"""pytorch#60456: hooks registered with register_hook on out = b1(x) + alpha * b2(x), on both branch outputs and on the input, report the same mean and variance for OUT, B1 and B2; that is what autograd must give, since the gradient of a sum reaches each addend unchanged when alpha is 1.

source: https://github.com/pytorch/pytorch/issues/60456
kind: lookalike
"""
import torch
import torch.nn as nn

alpha = 1
channels = 8


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.b1 = nn.Sequential(torch.nn.ReLU())
        self.b2 = nn.Sequential(torch.nn.ReLU())

    def forward(self, x, stats):
        x.register_hook(lambda g: stats.__setitem__('IN', (g.var().item(), g.mean().item())))
        y1 = self.b1(x)
        y1.register_hook(lambda g: stats.__setitem__('B1', (g.var().item(), g.mean().item())))
        y2 = self.b2(x)
        y2.register_hook(lambda g: stats.__setitem__('B2', (g.var().item(), g.mean().item())))
        out = y1 + alpha * y2
        out.register_hook(lambda g: stats.__setitem__('OUT', (g.var().item(), g.mean().item())))
        return out


torch.manual_seed(0)
net = Net()
stats = {}
x = torch.randn(4, channels, 6, 6, requires_grad=True)
out = net(x, stats)
loss = (out * torch.randn_like(out)).mean()
loss.backward()
for k in ('OUT', 'B2', 'B1', 'IN'):
    print('[%s] V = %.5g, M = %.5g' % (k, *stats[k]))
