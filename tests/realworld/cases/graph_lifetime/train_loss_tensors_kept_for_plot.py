"""Course notebook: the training loop returns the loss tensor itself, the results dict keeps every graph. The root is `train_loss += loss`: the reporter's closing comment names the missing `.item()` there as the fix (the `.detach()` on the append was a first workaround; label moved in session 29).

source: https://github.com/mrdbourke/pytorch-deep-learning/issues/583
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
model_0 = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model_0.parameters(), lr=0.1)


def train_step(model, batches, loss_fn, optimizer):
    model.train()
    train_loss = 0
    for X, y in batches:
        loss = loss_fn(model(X), y)
        train_loss += loss  # ROOT
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return train_loss / len(batches)


results = {"train_loss": []}
batches = [(torch.randn(4, 3, 2, 2), torch.randint(0, 3, (4,))) for _ in range(3)]
for epoch in range(2):
    train_loss = train_step(model_0, batches, loss_fn, optimizer)
    results["train_loss"].append(train_loss)


def plot_loss_curves(results):
    return np.array(results["train_loss"])


plot_loss_curves(results)  # SYMPTOM
