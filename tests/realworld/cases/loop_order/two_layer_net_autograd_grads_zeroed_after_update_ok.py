"""two_layer_net_autograd.py after the fix: the gradients are zeroed after the manual weight update (under torch.no_grad), once backward has created them.

source: https://github.com/jcjohnson/pytorch-examples/pull/4
kind: lookalike
verified: runs 5 iterations, the loss decreases and w1/w2 change every step
"""
import torch

dtype = torch.float
N, D_in, H, D_out = 64, 100, 10, 10
torch.manual_seed(0)
x = torch.randn(N, D_in, dtype=dtype)
y = torch.randn(N, D_out, dtype=dtype)
w1 = torch.randn(D_in, H, dtype=dtype, requires_grad=True)
w2 = torch.randn(H, D_out, dtype=dtype, requires_grad=True)

learning_rate = 1e-6
for t in range(5):
    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    print(t, loss.item())
    loss.backward()

    with torch.no_grad():
        w1 -= learning_rate * w1.grad
        w2 -= learning_rate * w2.grad
        w1.grad.zero_()
        w2.grad.zero_()
