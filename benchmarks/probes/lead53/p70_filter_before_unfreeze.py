import torch
import torch.nn as nn

backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 2)
model = nn.Sequential(backbone, head)
for p in backbone.parameters():
    p.requires_grad = False
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)

for epoch in range(4):
    if epoch == 2:
        for p in backbone.parameters():
            p.requires_grad = True  # ROOT
    x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
