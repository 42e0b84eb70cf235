"""aihwkit's 01_simple_layer example with the fix from the thread: opt.zero_grad() at each iteration, so each step applies only the current gradient.

source: https://github.com/IBM/aihwkit/issues/446
kind: lookalike
verified: the loss falls at every iteration
"""
import torch
from torch import Tensor
from torch.nn import Linear as AnalogLinear
from torch.nn.functional import mse_loss
from torch.optim import SGD as AnalogSGD

torch.manual_seed(0)
x = Tensor([[0.1, 0.2, 0.4, 0.3], [0.2, 0.1, 0.1, 0.3]])
y = Tensor([[1.0, 0.5], [0.7, 0.3]])

model = AnalogLinear(4, 2, bias=True)
opt = AnalogSGD(model.parameters(), lr=0.1)

for epoch in range(10):
    opt.zero_grad()
    pred = model(x)
    loss = mse_loss(pred, y)
    loss.backward()
    opt.step()
    print('Loss error: {:.16f}'.format(loss))
