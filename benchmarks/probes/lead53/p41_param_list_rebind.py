import torch


def sgd_update(params, lr):
    for i, p in enumerate(params):
        params[i] = p - lr * p.grad  # ROOT


w = torch.randn(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
params = [w, b]
x, y = torch.randn(8, 3), torch.randn(8, 1)
for it in range(3):
    loss = ((x @ params[0] + params[1] - y) ** 2).mean()
    loss.backward()
    sgd_update(params, 0.1)
