"""Range initialisation replaces the quantizer's scale Parameter after the optimizer holds the old one.

source: https://github.com/openvinotoolkit/nncf/pull/327
kind: bug
symptom: silent
verified: model.quantizer.scale never changes during training
"""
import torch
import torch.nn as nn


class SymmetricQuantizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def apply_minmax_init(self, min_values, max_values):
        self.scale = nn.Parameter(torch.max(min_values.abs(), max_values.abs()).reshape(1))  # ROOT

    def forward(self, x):
        s = self.scale.abs() + 1e-6
        q = torch.clamp(x / s, -1, 1)
        return (torch.round(q * 127) / 127 - q).detach() * s + q * s


class QuantNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.quantizer = SymmetricQuantizer()
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.quantizer(self.fc(x)))


torch.manual_seed(0)
model = QuantNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 8), torch.randn(64, 1)
with torch.no_grad():
    act = model.fc(x)
model.quantizer.apply_minmax_init(act.min(), act.max())
before = model.quantizer.scale.detach().clone()
for _ in range(5):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
print(torch.equal(before, model.quantizer.scale.detach()))
