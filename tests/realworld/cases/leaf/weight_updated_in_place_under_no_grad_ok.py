"""Linear regression by hand: w -= lr * w.grad under no_grad keeps the same leaf tensor.

source: https://github.com/pytorch/pytorch/issues/74158
kind: lookalike
verified: w converges towards 2.0
"""
import torch

X = torch.tensor([1, 2, 3, 4], dtype=torch.float32)
Y = torch.tensor([2, 4, 6, 8], dtype=torch.float32)
w = torch.tensor(0.0, dtype=torch.float32, requires_grad=True)


def predict(x):
    return w * x


def loss1(y, y_pred):
    return ((y_pred - y) ** 2).mean()


epochs, lr = 100, 0.01
for epoch in range(1, epochs + 1):
    y_pred = predict(X)
    l = loss1(Y, y_pred)
    l.backward()
    with torch.no_grad():
        w -= lr * w.grad
    w.grad.zero_()
print(w)
