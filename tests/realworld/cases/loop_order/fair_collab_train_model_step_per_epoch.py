"""Collaborative-ML train_model: optimizer.step() is dedented to the epoch loop, so only the last batch updates the model.

source: https://github.com/XinyiYS/Gradient-Driven-Rewards-to-Guarantee-Fairness-in-Collaborative-Machine-Learning/pull/3
kind: bug
symptom: silent
verified: the model takes 1 optimizer step per local epoch (4 batches); gradients of the first 3 batches are zeroed unused
"""
import torch
import torch.nn as nn


def train_model(model, loader, loss_fn, optimizer, device, E=1, **kwargs):
    model.train()
    steps = 0
    for e in range(E):
        for _, batch in enumerate(loader):
            data, label = batch[0], batch[1]
            data, label = data.to(device), label.to(device)
            optimizer.zero_grad()
            pred = model(data)
            loss_fn(pred, label).backward()
        optimizer.step()  # ROOT
        steps += 1
    if 'scheduler' in kwargs:
        kwargs['scheduler'].step()
    return model, steps


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
model, steps = train_model(model, loader, nn.CrossEntropyLoss(), optimizer, torch.device("cpu"), E=1)
print("optimizer steps:", steps, "batches:", len(loader))
