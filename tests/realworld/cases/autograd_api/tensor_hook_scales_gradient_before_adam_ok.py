"""A tensor hook multiplies the gradient by 10 before Adam; Adam's normalisation hides the scale, as the thread explains.

source: https://github.com/pytorch/pytorch/issues/2843
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
X = torch.FloatTensor([4])
a = torch.FloatTensor([2]).requires_grad_()
criterion = nn.MSELoss()
optimizer = torch.optim.Adam([a], lr=1e-2)

h = a.register_hook(lambda grad: grad * 10)
for step in range(3):
    y = a * X
    optimizer.zero_grad()
    loss = criterion(y, torch.FloatTensor([7]))
    loss.backward()
    optimizer.step()
h.remove()
print(a, a.grad)
