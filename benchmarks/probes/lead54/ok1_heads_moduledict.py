import torch
import torch.nn as nn

TASKS = {"age": 1, "gender": 2}


class MultiTask(nn.Module):
    def __init__(self, tasks, dim=16):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, dim), nn.ReLU())
        self.heads = nn.ModuleDict({name: nn.Linear(dim, n) for name, n in tasks.items()})
        self.names = {name: i for i, name in enumerate(tasks)}

    def forward(self, x):
        h = self.trunk(x)
        return {name: head(h) for name, head in self.heads.items()}


net = MultiTask(TASKS)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for _ in range(2):
    out = net(torch.randn(6, 10))
    loss = sum(v.pow(2).mean() for v in out.values())
    opt.zero_grad()
    loss.backward()
    opt.step()
