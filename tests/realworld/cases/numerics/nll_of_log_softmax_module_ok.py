"""The same loss written with nn.LogSoftmax: large logits give a finite gradient.

source: https://github.com/pytorch/pytorch/issues/1620
kind: lookalike
verified: model.weight.grad is finite
"""
import torch
from torch import nn

lsm = nn.LogSoftmax(dim=1)
crit = nn.NLLLoss()
target = torch.LongTensor([2])
data = torch.FloatTensor([[0, 50, -50]])

torch.manual_seed(0)
model = nn.Linear(3, 3, bias=False)
with torch.no_grad():
    model.weight.copy_(torch.eye(3) * 20)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
optimizer.zero_grad()
loss_sm = crit(lsm(model(data)), target)
loss_sm.backward()
print(loss_sm.item(), model.weight.grad)
