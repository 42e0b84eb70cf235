"""Trainer accumulates over batches: zero_grad before the loop and after each applied step.

source: https://github.com/openpifpaf/openpifpaf/issues/123
kind: lookalike
"""
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, optimizer, stride_apply=2):
        self.model = model
        self.optimizer = optimizer
        self.stride_apply = stride_apply

    def train_batch(self, data, targets, apply_gradients=True):
        loss = nn.functional.mse_loss(self.model(data), targets) / self.stride_apply
        if loss is not None:
            loss.backward()
        if apply_gradients:
            self.optimizer.step()
            self.optimizer.zero_grad()
        return loss.item()

    def train(self, scenes):
        self.model.train()
        self.optimizer.zero_grad()
        for batch_idx, (data, targets) in enumerate(scenes):
            apply_gradients = batch_idx % self.stride_apply == self.stride_apply - 1
            self.train_batch(data, targets, apply_gradients)


torch.manual_seed(0)
model = nn.Linear(6, 2)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
trainer.train([(torch.randn(4, 6), torch.randn(4, 2)) for _ in range(6)])
