import torch
import torch.nn as nn
from losses import DiceLoss

model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
criterion = DiceLoss()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    img = torch.randn(4, 1, 16, 16)
    mask = (torch.rand(4, 16, 16) > 0.7).float()
    loss = criterion(model(img).squeeze(1), mask)
    opt.zero_grad()
    loss.backward()
    opt.step()
