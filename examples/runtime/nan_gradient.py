"""Silent: sqrt of a value that can be zero gives an infinite gradient in the first layer."""
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with torch.no_grad():
    model[0].weight.zero_()
    model[0].bias.zero_()
x = torch.randn(8, 4)
for step in range(2):
    opt.zero_grad()
    h = model[0](x)
    loss = h.pow(2).sum(1).sqrt().mean() + model[2](torch.relu(h)).mean()  # <- cause
    loss.backward()
    opt.step()
