"""The first module's output is argmaxed and the index is passed to the second module; the first module gets no gradient.

source: https://github.com/pytorch/pytorch/issues/1339
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'data'
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
first_model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
second_model = nn.Sequential(nn.Embedding(5, 8), nn.Linear(8, 1))
criterion = nn.MSELoss()

x, y = torch.randn(12, 10), torch.randn(12, 1)
y_p = first_model(x)
y_p = torch.max(y_p, 1)[1]  # ROOT
out = second_model(y_p)
loss = criterion(out, y)

first_model.zero_grad()
second_model.zero_grad()
loss.backward()
for param in second_model.parameters():
    print('grad data: ', param.grad.data.norm())
for param in first_model.parameters():
    print('grad data: ', param.grad.data.norm())  # SYMPTOM
