"""Bilevel hyperparameter optimization takes the validation loss gradient over the L2 hyperparameter with allow_unused=True and turns None into zeros.

source: https://github.com/prolearner/hypertorch/issues/3
kind: lookalike
"""
import torch
import torch.nn.functional as F


def inner_loss(params, hparams, x, y):
    w, = params
    log_l2, = hparams
    return F.mse_loss(x @ w, y) + log_l2.exp() * (w ** 2).sum()


def outer_loss(params, hparams, x, y):
    w, = params
    return F.mse_loss(x @ w, y)


def grad_unused_zero(output, inputs, retain_graph=False):
    grads = torch.autograd.grad(output, inputs, allow_unused=True, retain_graph=retain_graph)
    return tuple(torch.zeros_like(var) if grad is None else grad for var, grad in zip(inputs, grads))


def get_outer_gradients(outer_loss, params, hparams, retain_graph=True):
    grad_outer_w = grad_unused_zero(outer_loss, params, retain_graph=retain_graph)
    grad_outer_hparams = grad_unused_zero(outer_loss, hparams, retain_graph=retain_graph)
    return grad_outer_w, grad_outer_hparams


torch.manual_seed(0)
x_tr, y_tr, x_val, y_val = torch.randn(32, 5), torch.randn(32), torch.randn(32, 5), torch.randn(32)
w = torch.zeros(5, requires_grad=True)
log_l2 = torch.tensor(-2.0, requires_grad=True)
outer_opt = torch.optim.SGD([log_l2], lr=0.1)
for t in range(10):
    g, = torch.autograd.grad(inner_loss([w], [log_l2], x_tr, y_tr), [w])
    with torch.no_grad():
        w -= 0.1 * g
o_loss = outer_loss([w], [log_l2], x_val, y_val)
grad_outer_w, grad_outer_hparams = get_outer_gradients(o_loss, [w], [log_l2])
print(grad_outer_hparams)
