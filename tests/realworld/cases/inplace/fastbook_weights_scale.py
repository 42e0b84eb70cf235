"""fastbook MNIST chapter: nudging one weight in place to see how the prediction changes.

source: https://github.com/fastai/fastbook/pull/471
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch

torch.manual_seed(0)


def init_params(size, std=1.0):
    return (torch.randn(size) * std).requires_grad_()


weights = init_params((28 * 28, 1))
bias = init_params(1)
train_x = torch.randn(8, 28 * 28)
preds = train_x @ weights + bias
weights[0] *= 1.0001  # ROOT
preds2 = train_x @ weights + bias
print(((preds > 0) == (preds2 > 0)).float().mean())
