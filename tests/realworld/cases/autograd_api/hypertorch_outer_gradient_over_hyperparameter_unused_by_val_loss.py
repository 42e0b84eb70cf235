"""Bilevel hyperparameter optimization takes autograd.grad of the validation loss over the L2 hyperparameter, which that loss never uses.

source: https://github.com/prolearner/hypertorch/issues/3
kind: bug
symptom: crash
verified: RuntimeError: The differentiated Tensor at index 0 appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.
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


def get_outer_gradients(outer_loss, params, hparams, retain_graph=True):
    grad_outer_w = torch.autograd.grad(outer_loss, params, retain_graph=retain_graph)
    grad_outer_hparams = torch.autograd.grad(outer_loss, hparams, retain_graph=retain_graph)  # ROOT
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
