"""two_layer_net_autograd.py (PyTorch: Variables and autograd): the weights' gradients are zeroed manually at the top of the loop, before the first backward pass has created them, so w1.grad is still None.

source: https://github.com/jcjohnson/pytorch-examples/issues/7
kind: bug
symptom: crash
verified: 'NoneType' object has no attribute 'data'
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
    # Manually zero the gradients before running the backward pass
    w1.grad.data.zero_()  # ROOT
    w2.grad.data.zero_()

    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    print(t, loss.item())
    loss.backward()

    w1.data -= learning_rate * w1.grad.data
    w2.data -= learning_rate * w2.grad.data
