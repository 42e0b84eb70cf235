import torch
import torch.nn as nn
import torch.nn.functional as F
from engine import create_trainer, create_evaluator


def accuracy(logits, y):
    return (logits.argmax(1) == y).float().mean().item()


model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_step = create_trainer(model, opt, F.cross_entropy)
evaluator = create_evaluator(model, accuracy)
train = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(4)]
val = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(2)]
for epoch in range(2):
    for batch in train:
        train_step(batch)
    print(epoch, evaluator(val))
