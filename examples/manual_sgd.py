"""Hand-written SGD that rebinds the weight instead of updating it in place."""
import torch

x = torch.randn(100, 3)
y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1
w = torch.zeros(3, requires_grad=True)
lr = 0.1

for step in range(20):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    w = w - lr * w.grad
    w.grad.zero_()
