import re

import torch
import torch.nn as nn
import torch.nn.functional as F

FROZEN = [r"^embed\.", r"^blocks\.0\."]


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.head(x)


def apply_freeze(model, patterns):
    for name, p in model.named_parameters():
        if any(re.match(pat, name) for pat in patterns):
            p.requires_grad_(False)


model = Tiny()
apply_freeze(model, FROZEN)
model.train()
for p in model.parameters():
    p.requires_grad = True  # ROOT
opt = torch.optim.SGD(model.parameters(), lr=0.5)
before = model.embed.weight.clone()
for _ in range(2):
    x, y = torch.randn(8, 8), torch.randint(0, 2, (8,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("frozen embed moved:", not torch.equal(before, model.embed.weight))
