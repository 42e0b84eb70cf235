"""pred * log(pred / gt) is NaN where a softmax output underflows to 0; nan_to_num(0) hides it in the loss, not the gradient.

source: https://github.com/pytorch/pytorch/issues/94700
kind: bug
symptom: silent
verified: the loss is finite but net[0].weight.grad is NaN, and the weights become NaN after optimizer.step()
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Softmax(dim=1))
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
x, gt = torch.randn(16, 4) * 1000, torch.softmax(torch.randn(16, 3), dim=1)
pred = net(x)
loss = pred * torch.log(pred / gt) + gt - pred  # ROOT
loss = (loss.nan_to_num(0)).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item(), "nan grad:", torch.isnan(net[0].weight.grad).any().item(),
      "nan weight:", torch.isnan(net[0].weight).any().item())
