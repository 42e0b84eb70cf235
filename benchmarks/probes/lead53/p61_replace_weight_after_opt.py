import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, idx):
        return self.out(self.emb(idx).mean(1))


def load_pretrained(model, table):
    model.emb.weight = nn.Parameter(table)  # ROOT


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
load_pretrained(model, torch.randn(10, 4))
for _ in range(3):
    idx = torch.randint(0, 10, (5, 3))
    loss = model(idx).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
