"""LBFGS with a closure that only returns the loss: the docs said the closure should not change .grad, so no backward.

source: https://github.com/pytorch/pytorch/issues/38006
kind: bug
symptom: silent
verified: model.weight never changes: LBFGS sees no gradient and stops at once every step
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
loss_fn = nn.MSELoss()
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=10)
dataset = [(torch.randn(16, 3), torch.randn(16, 1)) for _ in range(3)]
for input, target in dataset:
    def closure():
        optimizer.zero_grad()
        output = model(input)
        loss = loss_fn(output, target)
        return loss  # ROOT
    optimizer.step(closure)
