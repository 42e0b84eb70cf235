"""Labels generated from true weights created with requires_grad: every batch backwards into that graph.

source: https://github.com/zhangyu2234/Deep-learning-by-hand
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch


def relu(x):
    return torch.clamp(x, min=0)


def loss(y_hat, y):
    return ((y_hat - y) ** 2 / 2).sum()


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def fc(x, w, b):
    return relu(torch.mm(x, w) + b)


torch.manual_seed(0)
num_samples, num_features, num_hiddens = 200, 2, 2
X = torch.randn((num_samples, num_features), dtype=torch.float32)
true_W = torch.randn((num_hiddens, 1), requires_grad=True, dtype=torch.float32)
true_b = torch.randn(1, requires_grad=True, dtype=torch.float32)
Y = torch.mm(X, true_W) + true_b  # ROOT
W = torch.normal(0, 0.01, size=(num_hiddens, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
batch_size, lr = 20, 0.01
for epoch in range(2):
    for i in range(0, num_samples, batch_size):
        x, y = X[i:i + batch_size], Y[i:i + batch_size]
        l = loss(fc(x, W, b), y)
        l.backward()  # SYMPTOM
        sgd([W, b], lr, batch_size)
