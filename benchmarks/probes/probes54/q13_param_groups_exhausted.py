import torch
import torch.nn as nn
import torch.nn.functional as F

backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32))
head = nn.Linear(32, 3)
model = nn.Sequential(backbone, head)

backbone_params = backbone.parameters()  # ROOT
print("backbone size:", sum(p.numel() for p in backbone_params))  # ROOT
optimizer = torch.optim.AdamW(
    [
        {"params": backbone_params, "lr": 1e-4},
        {"params": head.parameters(), "lr": 1e-2},
    ]
)
before = backbone[0].weight.clone()
for _ in range(3):
    x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("backbone moved:", not torch.equal(before, backbone[0].weight))
