"""Gradual unfreezing: the backbone is unfrozen at epoch 2 but the optimizer only ever saw the head."""
import torch
import torch.nn as nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(10, 20), nn.Tanh())
head = nn.Linear(20, 1)
model = nn.Sequential(backbone, head)

for p in backbone.parameters():
    p.requires_grad = False

optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
loss_fn = nn.MSELoss()
start = backbone[0].weight.detach().clone()

for epoch in range(4):
    if epoch == 2:
        for p in backbone.parameters():
            p.requires_grad = True  # ROOT
    for _ in range(5):
        x, y = torch.randn(8, 10), torch.randn(8, 1)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

print("backbone moved after unfreezing:", not torch.equal(start, backbone[0].weight))
