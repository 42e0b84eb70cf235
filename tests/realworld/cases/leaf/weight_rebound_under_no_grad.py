"""Linear regression by hand: w = w - lr * w.grad under no_grad replaces the leaf with a plain tensor.

source: https://github.com/pytorch/pytorch/issues/74158
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'zero_'
"""
import torch

X = torch.tensor([1, 2, 3, 4], dtype=torch.float32)
Y = torch.tensor([2, 4, 6, 8], dtype=torch.float32)
w = torch.tensor(0.0, dtype=torch.float32, requires_grad=True)


def predict(x):
    return w * x


def loss1(y, y_pred):
    return ((y_pred - y) ** 2).mean()


epochs, lr = 20, 0.01
for epoch in range(1, epochs + 1):
    y_pred = predict(X)
    l = loss1(Y, y_pred)
    l.backward()
    with torch.no_grad():
        w = w - lr * w.grad  # ROOT
    w.grad.zero_()  # SYMPTOM
print(w)
