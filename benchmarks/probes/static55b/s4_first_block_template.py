import torch
import torch.nn as nn


class Fuse(nn.Module):
    def __init__(self, c=4, n=3):
        super().__init__()
        self.stages = nn.ModuleList()
        for k in range(n):
            if not k:
                self.stages.append({first})
            else:
                self.stages.append(nn.Sequential(nn.Conv2d(c, c, 1), nn.Tanh()))

    def forward(self, x):
        out = self.stages[0](x)
        for k in range(1, len(self.stages)):
            out += self.stages[k](x)
        return out


net = Fuse()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loss = net(torch.randn(2, 4, 5, 5)).pow(2).mean()
loss.backward()
opt.step()
print("ran")
