import torch
from models import MLP

model = MLP([4, 8, 8])
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
