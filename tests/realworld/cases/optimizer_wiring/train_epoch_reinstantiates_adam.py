"""deepsensor.train.train_epoch creates a new Adam optimiser at the start of every epoch.

source: https://github.com/alan-turing-institute/deepsensor/issues/47
kind: bug
symptom: silent
verified: Adam's step count restarts every epoch: optimizer state holds 2 steps after 3 epochs of 2 batches
"""
import torch
import torch.nn as nn


class ConvNP(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 8)
        self.decoder = nn.Linear(8, 1)

    def loss_fn(self, task):
        x, y = task
        return nn.functional.mse_loss(self.decoder(torch.relu(self.encoder(x))), y)


def train_epoch(model, tasks, lr=5e-5, batch_size=None, opt=None):
    opt = torch.optim.Adam(model.parameters(), lr=lr)  # ROOT
    batch_losses = []
    for task in tasks:
        opt.zero_grad()
        task_loss = model.loss_fn(task)
        task_loss.backward()
        opt.step()
        batch_losses.append(task_loss.item())
    model.last_opt = opt
    return batch_losses


torch.manual_seed(0)
model = ConvNP()
train_tasks = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)]
for epoch in range(3):
    batch_losses = train_epoch(model, train_tasks)
opt = model.last_opt
