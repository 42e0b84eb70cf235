"""torchnet APMeter.add is given the detached model output, so its score buffer stays a plain tensor that can be resized.

source: https://github.com/meta-pytorch/tnt/issues/133
kind: lookalike
"""
import math

import torch
import torch.nn as nn


class APMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.scores = torch.FloatTensor(torch.FloatStorage())
        self.targets = torch.LongTensor(torch.LongStorage())

    def add(self, output, target):
        if self.scores.numel() > 0:
            assert target.size(1) == self.targets.size(1)
        if self.scores.storage().size() < self.scores.numel() + output.numel():
            new_size = math.ceil(self.scores.storage().size() * 1.5)
            self.scores.storage().resize_(int(new_size + output.numel()))
            self.targets.storage().resize_(int(new_size + output.numel()))
        offset = self.scores.size(0) if self.scores.dim() > 0 else 0
        self.scores.resize_(offset + output.size(0), output.size(1))
        self.targets.resize_(offset + target.size(0), target.size(1))
        self.scores.narrow(0, offset, output.size(0)).copy_(output)
        self.targets.narrow(0, offset, target.size(0)).copy_(target)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ap_meter = APMeter()
for step in range(3):
    inputs, target = torch.randn(8, 16), torch.randint(0, 2, (8, 5))
    output = model(inputs)
    loss = criterion(output, target.float())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ap_meter.add(output.detach(), target)
