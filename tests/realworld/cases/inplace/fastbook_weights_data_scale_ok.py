"""fastbook MNIST chapter: nudging one weight through .data, as the book was fixed.

source: https://github.com/fastai/fastbook/pull/471
kind: lookalike
verified: the prediction changes slightly and weights still get a gradient afterwards
"""
import torch

torch.manual_seed(0)


def init_params(size, std=1.0):
    return (torch.randn(size) * std).requires_grad_()


weights = init_params((28 * 28, 1))
bias = init_params(1)
train_x = torch.randn(8, 28 * 28)
train_y = (torch.rand(8, 1) > 0.5).float()
weights[0].data *= 1.0001
preds = (train_x @ weights + bias).sigmoid()
loss = torch.where(train_y == 1, 1 - preds, preds).mean()
loss.backward()
weights.data -= weights.grad.data * 1.0
bias.data -= bias.grad.data * 1.0
print(weights.grad.abs().sum().item() > 0)
