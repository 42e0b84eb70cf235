"""RMSE loss written as torch.sqrt(nn.MSELoss()(...)): when the prediction matches the target exactly the MSE is 0 and sqrt's backward divides by zero, the gradient is NaN (anomaly mode names MseLossBackward/SqrtBackward).

source: https://discuss.pytorch.org/t/function-mselossbackward-returned-nan-values-in-its-0th-output/94875
kind: bug
symptom: silent
verified: x.grad is tensor([[nan]]) although the loss is 0.0
"""
import torch
import torch.nn as nn

x = torch.randn(1, 1, requires_grad=True)
y = torch.zeros(1, 1)
criterion = nn.MSELoss()

loss = torch.sqrt(criterion(x * 0, y))  # ROOT
loss.backward()
print(loss.item(), x.grad)
