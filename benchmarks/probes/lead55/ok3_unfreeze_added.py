"""Look-alike of r03: the unfrozen backbone is handed to the optimizer as a new group."""
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

for epoch in range(4):
    if epoch == 2:
        for p in backbone.parameters():
            p.requires_grad = True
        optimizer.add_param_group({"params": backbone.parameters(), "lr": 0.01})
    for _ in range(5):
        x, y = torch.randn(8, 10), torch.randn(8, 1)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
