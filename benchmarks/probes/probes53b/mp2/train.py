import torch
import torch.nn as nn
from engine import train_step

net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
opt = torch.optim.Adam(net.parameters(), 1e-3)
for _ in range(2):
    print(train_step(net, opt, (torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8))))
