"""aihwkit's 01_simple_layer example trains the layer with backward() and step() but never zeroes the gradients, so every step applies the sum of all gradients so far.

source: https://github.com/IBM/aihwkit/issues/446
kind: bug
symptom: silent
verified: over 10 iterations the loss goes 0.61, 0.47, 0.27, 0.089, 0.016, 0.084, 0.26, 0.47, 0.60, 0.60 (down, then up again as in the report); with opt.zero_grad() at each iteration it falls every step, to 0.075 at the tenth
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
    pred = model(x)
    loss = mse_loss(pred, y)
    loss.backward()  # ROOT
    opt.step()
    print('Loss error: {:.16f}'.format(loss))
