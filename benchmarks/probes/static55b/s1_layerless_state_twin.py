import torch
import torch.nn as nn


class Leaky(nn.Module):
    def __init__(self, beta=0.9):
        super().__init__()
        self.beta = beta
        self.mem = torch.zeros(1)

    def clear(self):
        self.mem = torch.zeros(1)

    def forward(self, cur):
        mem = self.beta * self.mem + cur
        self.mem = mem
        return torch.sigmoid(mem)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.lif = Leaky()

    def forward(self, x):
        h = self.fc(x)
        return self.lif(h)


def clear_all(net):
    net.lif.clear()


net = Net()
opt = torch.optim.Adam(net.parameters())
for step in range(3):
    x = torch.randn(2, 4)
    loss = net(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
