"""Network keeps its two conv branches as nn.Sequential objects inside a plain list; the model has no parameters to optimize.

source: https://github.com/pytorch/pytorch/issues/4412
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn


class Network(nn.Module):
    def __init__(self, in_channels=4):
        super(Network, self).__init__()
        self.in_channels = in_channels
        self.convs = [  # ROOT
            nn.Sequential(
                nn.Conv2d(self.in_channels, self.in_channels, kernel_size=3, stride=1, padding=1),
                nn.Conv2d(self.in_channels, self.in_channels, kernel_size=3, stride=1, padding=1),
            ),
            nn.Sequential(
                nn.Conv2d(self.in_channels, self.in_channels, kernel_size=3, stride=1, padding=1),
                nn.Conv2d(self.in_channels, self.in_channels, kernel_size=3, stride=1, padding=1),
            ),
        ]

    def forward(self, x):
        output = self.convs[0](x)
        output = self.convs[1](output)
        return output


torch.manual_seed(0)
net = Network()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)  # SYMPTOM
x = torch.randn(2, 4, 8, 8)
loss = net(x).abs().mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
