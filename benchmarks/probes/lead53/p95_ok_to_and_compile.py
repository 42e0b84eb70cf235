import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model = model.to(torch.device("cpu"))
model = model.float()
for _ in range(2):
    loss = model(torch.randn(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
