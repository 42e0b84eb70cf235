"""LBFGS with the documented closure: zero_grad, forward, loss.backward(), return the loss.

source: https://github.com/pytorch/pytorch/issues/38006
kind: lookalike
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
        loss.backward()
        return loss
    optimizer.step(closure)
