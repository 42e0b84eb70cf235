"""Conv layers built in a loop and appended to a plain Python list, so the model has no parameters.

source: https://github.com/pytorch/pytorch/issues/8017
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, layer_size):
        super(Model, self).__init__()
        self.conv = []  # ROOT
        for idx in range(layer_size):
            self.conv.append(nn.Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=(3, 3)))
            in_channels = out_channels
            out_channels *= 2

    def forward(self, x):
        for conv in self.conv:
            x = conv(x)
        return x


torch.manual_seed(0)
model = Model(in_channels=1, out_channels=16, layer_size=3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)  # SYMPTOM
x = torch.randn(2, 1, 16, 16)
loss = model(x).pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
