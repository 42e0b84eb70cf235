"""Layers stored through self.__dict__ bypass nn.Module registration."""
import torch
import torch.nn as nn


class MultiHead(nn.Module):
    def __init__(self, d, tasks):
        super().__init__()
        self.trunk = nn.Linear(d, 16)
        self.tasks = list(tasks)
        for t in self.tasks:
            self.__dict__[f"head_{t}"] = nn.Linear(16, 1)  # ROOT

    def forward(self, x):
        h = torch.relu(self.trunk(x))
        return {t: getattr(self, f"head_{t}")(h) for t in self.tasks}


torch.manual_seed(0)
model = MultiHead(6, ["a", "b"])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w0 = model.head_a.weight.detach().clone()
for _ in range(5):
    x = torch.randn(8, 6)
    out = model(x)
    loss = sum((o - x.sum(1, keepdim=True)).pow(2).mean() for o in out.values())
    opt.zero_grad()
    loss.backward()
    opt.step()
print("head moved:", not torch.equal(w0, model.head_a.weight))
