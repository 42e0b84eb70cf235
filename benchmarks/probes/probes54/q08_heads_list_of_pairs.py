import torch
import torch.nn as nn
import torch.nn.functional as F

TASKS = {"age": 1, "gender": 2, "mood": 5}


class MultiHead(nn.Module):
    def __init__(self, tasks, dim=16):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, dim), nn.ReLU())
        self.heads = [(name, nn.Linear(dim, n)) for name, n in tasks.items()]  # ROOT

    def forward(self, x):
        h = self.trunk(x)
        return {name: head(h) for name, head in self.heads}


model = MultiHead(TASKS)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
before = model.heads[0][1].weight.clone()
for _ in range(3):
    x = torch.randn(8, 10)
    out = model(x)
    loss = F.mse_loss(out["age"], torch.randn(8, 1)) + F.cross_entropy(out["gender"], torch.randint(0, 2, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("age head moved:", not torch.equal(before, model.heads[0][1].weight))
