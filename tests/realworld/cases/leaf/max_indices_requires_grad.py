"""Setting requires_grad on the indices returned by torch.max to make the loss differentiable.

source: https://github.com/pytorch/pytorch/issues/95110
kind: bug
symptom: crash
verified: RuntimeError: only Tensors of floating point and complex dtype can require gradients
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(10, 4)
criterion = nn.MSELoss()
x = torch.randn(8, 10)
target = torch.randint(0, 4, (8,)).float()

outputs = model(x)
_, predicted = torch.max(outputs, 1)
predicted.requires_grad = True  # ROOT
loss = criterion(predicted.float(), target)
loss.backward()
