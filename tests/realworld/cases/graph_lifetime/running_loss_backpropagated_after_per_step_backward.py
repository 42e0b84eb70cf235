"""Training loop sums each step's loss tensor into running_loss and then calls running_loss.backward() after the per-step backwards freed those graphs.

source: https://github.com/pytorch/pytorch/issues/17568
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
running_loss = 0
for i in range(4):
    inputs, labels = torch.randn(8, 10), torch.randn(8, 1)
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    running_loss += loss  # ROOT
running_loss.backward()  # SYMPTOM
