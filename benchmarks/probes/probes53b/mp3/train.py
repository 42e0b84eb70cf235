import torch
import torch.nn as nn
from engine import evaluate, train_epoch

model = nn.Linear(10, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 10), torch.randint(0, 3, (4,))) for _ in range(2)]
print("baseline acc", evaluate(model, loader))
for epoch in range(2):
    train_epoch(model, loader, opt)
    print(epoch, evaluate(model, loader))
