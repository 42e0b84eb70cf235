import torch
import torch.nn as nn
from engine import train_one_epoch

model = nn.Linear(8, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
for epoch in range(2):
    train_one_epoch(model, loader, opt, torch.device("cpu"))
