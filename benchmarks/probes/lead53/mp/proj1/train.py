import torch
import torch.nn as nn
from engine import train_one_epoch

model = nn.Conv2d(1, 1, 3, padding=1)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = [(torch.randn(2, 1, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float()) for _ in range(2)]
train_one_epoch(model, loader, opt)
