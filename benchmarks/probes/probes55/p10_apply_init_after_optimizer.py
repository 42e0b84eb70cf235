import math
import torch
import torch.nn as nn


def lecun_init(m):
    if isinstance(m, nn.Linear):
        fan_in = m.weight.shape[1]
        m.weight = nn.Parameter(torch.randn_like(m.weight) / math.sqrt(fan_in))  # ROOT
        if m.bias is not None:
            nn.init.zeros_(m.bias)


model = nn.Sequential(nn.Linear(10, 20), nn.SELU(), nn.Linear(20, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model.apply(lecun_init)  # ROOT
w0 = model[0].weight.clone()
for _ in range(5):
    x, y = torch.randn(32, 10), torch.randn(32, 1)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("moved:", (model[0].weight - w0).abs().max().item())
