import torch
import torch.nn as nn

TASKS = {"age": 1, "gender": 2, "race": 5}


class MultiTask(nn.Module):
    def __init__(self, tasks, dim=16):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, dim), nn.ReLU())
        self.heads = {name: nn.Linear(dim, n) for name, n in tasks.items()}  # ROOT

    def forward(self, x):
        h = self.trunk(x)
        return {name: head(h) for name, head in self.heads.items()}


net = MultiTask(TASKS)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
w0 = net.heads["race"].weight.clone()
for _ in range(3):
    x = torch.randn(6, 10)
    out = net(x)
    loss = out["age"].pow(2).mean() + out["gender"].pow(2).mean() + out["race"].pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("head moved:", not torch.equal(w0, net.heads["race"].weight))
