"""Model speedup replaces the pruned layers, then a new optimizer is built over the new model.

source: https://github.com/microsoft/nni/issues/4521
kind: lookalike
verified: the new model.fc1.weight changes during fine-tuning
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ModelSpeedup:
    def __init__(self, model, keep):
        self.model, self.keep = model, keep

    def speedup_model(self):
        old1, old2 = self.model.fc1, self.model.fc2
        self.model.fc1 = nn.Linear(10, len(self.keep))
        self.model.fc2 = nn.Linear(len(self.keep), 2)
        with torch.no_grad():
            self.model.fc1.weight.copy_(old1.weight[self.keep])
            self.model.fc1.bias.copy_(old1.bias[self.keep])
            self.model.fc2.weight.copy_(old2.weight[:, self.keep])
            self.model.fc2.bias.copy_(old2.bias)


torch.manual_seed(0)
model = Net()
m_speedup = ModelSpeedup(model, keep=list(range(16)))
m_speedup.speedup_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
before = model.fc1.weight.detach().clone()
x, y = torch.randn(32, 10), torch.randint(0, 2, (32,))
for epoch in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(torch.equal(before, model.fc1.weight.detach()))
