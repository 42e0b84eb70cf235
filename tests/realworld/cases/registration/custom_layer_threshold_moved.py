"""CustomLayer's threshold is nn.Parameter(...).to(...) in __init__, so the model has no parameters.

source: https://github.com/pytorch/pytorch/issues/39062
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch, torch.nn as nn


class CustomLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.threshold = nn.Parameter(torch.randn(1)).to(torch.float64)  # ROOT

    def forward(self, input):
        return torch.relu(input - self.threshold)


torch.manual_seed(0)
model = nn.Sequential(CustomLayer()).to(torch.float64)
print(list(model.parameters()))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # SYMPTOM
x = torch.randn(8, 4, dtype=torch.float64)
loss = model(x).sum()
loss.backward()
optimizer.step()
