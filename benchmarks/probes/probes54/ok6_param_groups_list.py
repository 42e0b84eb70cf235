from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32))
head = nn.Linear(32, 3)
model = nn.Sequential(backbone, head)

backbone_params = list(backbone.parameters())
print("backbone size:", sum(p.numel() for p in backbone_params))
make_opt = partial(torch.optim.AdamW, weight_decay=0.01)
optimizer = make_opt([{"params": backbone_params, "lr": 1e-4}, {"params": head.parameters(), "lr": 1e-2}])
for fold in range(2):
    for _ in range(2):
        x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
