"""NLLLoss over torch.log(nn.Softmax(x)): a probability underflows to 0 and the gradient is NaN.

source: https://github.com/pytorch/pytorch/issues/1620
kind: bug
symptom: silent
verified: model.weight.grad contains nan
"""
import torch
from torch import nn

sm = nn.Softmax(dim=1)
crit = nn.NLLLoss()
target = torch.LongTensor([2])
data = torch.FloatTensor([[0, 50, -50]])

torch.manual_seed(0)
model = nn.Linear(3, 3, bias=False)
with torch.no_grad():
    model.weight.copy_(torch.eye(3) * 20)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
optimizer.zero_grad()
loss_sm = crit(torch.log(sm(model(data))), target)  # ROOT
loss_sm.backward()
print(loss_sm.item(), model.weight.grad)
