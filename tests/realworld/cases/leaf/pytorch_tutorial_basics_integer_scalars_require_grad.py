"""pytorch-tutorial 01-basics: the autograd example builds x, w and b with torch.tensor(1, requires_grad=True) from integer literals, so the tensors are int64 and cannot require gradients (since PyTorch 0.4).

source: https://github.com/yunjey/pytorch-tutorial/pull/128
kind: bug
symptom: crash
verified: Only Tensors of floating point and complex dtype can require gradients
"""
import torch
import torch.nn as nn

# ================================================================== #
#                     1. Basic autograd example 1                    #
# ================================================================== #

# Create tensors.
x = torch.tensor(1, requires_grad=True)  # ROOT
w = torch.tensor(2, requires_grad=True)
b = torch.tensor(3, requires_grad=True)

# Build a computational graph.
y = w * x + b    # y = 2 * x + 3

# Compute gradients.
y.backward()

# Print out the gradients.
print(x.grad)    # x.grad = 2
print(w.grad)    # w.grad = 1
print(b.grad)    # b.grad = 1

# ================================================================== #
#                    2. Basic autograd example 2                     #
# ================================================================== #

x = torch.randn(10, 3)
y = torch.randn(10, 2)
linear = nn.Linear(3, 2)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(linear.parameters(), lr=0.01)
pred = linear(x)
loss = criterion(pred, y)
loss.backward()
optimizer.step()
print('loss after 1 step optimization: ', criterion(linear(x), y).item())
