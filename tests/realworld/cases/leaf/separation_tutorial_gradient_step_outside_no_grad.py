"""Gradient-descent tutorial updates its leaf weights with `w -= lr * w.grad` outside torch.no_grad().

source: https://github.com/source-separation/tutorial/issues/18
kind: bug
symptom: crash
verified: RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch

torch.manual_seed(0)
LEARNING_RATE = 0.1
x = torch.randn(64, 4)
y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1 * torch.randn(64)

w = torch.zeros(4, requires_grad=True)
grad_norms, losses = [], []
for i in range(20):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    grad_norms.append(w.grad.norm().item())
    losses.append(loss.item())
    w -= LEARNING_RATE * w.grad  # ROOT
    w.grad.zero_()
print(losses[-1])
