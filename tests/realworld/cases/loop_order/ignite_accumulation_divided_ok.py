"""Corrected FAQ update function: loss divided by accumulation_steps, step and zero_grad every N iterations.

source: https://github.com/pytorch/ignite/issues/583
kind: lookalike
"""
import torch
import torch.nn as nn


class State:
    iteration = 0


class Engine:
    def __init__(self, update_fn):
        self.update_fn = update_fn
        self.state = State()

    def run(self, data):
        for batch in data:
            self.state.iteration += 1
            self.update_fn(self, batch)


torch.manual_seed(0)
model = nn.Linear(5, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
accumulation_steps = 4


def update_fn(engine, batch):
    model.train()
    x, y = batch
    y_pred = model(x)
    loss = criterion(y_pred, y) / accumulation_steps
    loss.backward()
    if engine.state.iteration % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


trainer = Engine(update_fn)
trainer.run([(torch.randn(4, 5), torch.randn(4, 1)) for _ in range(8)])
