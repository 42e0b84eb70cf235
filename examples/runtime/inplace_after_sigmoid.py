"""Crash: the output of sigmoid (saved for its backward) is changed in place."""
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        g = torch.sigmoid(self.fc(x))
        g *= 2  # <- cause
        return g


model = Gate()
model(torch.randn(3, 4)).sum().backward()
