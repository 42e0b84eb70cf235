"""fastai course-v3 lesson2-sgd with the fix from the issue: the fitted line x@a is computed for plotting under torch.no_grad(), so matplotlib receives a tensor without a graph.

source: https://github.com/fastai/course-v3/issues/455
kind: lookalike
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from torch import nn, tensor

torch.manual_seed(42)
n = 100
x = torch.ones(n, 2)
x[:, 0].uniform_(-1., 1)
a = tensor([3., 2])
y = x @ a + torch.rand(n)


def mse(y_hat, y): return ((y_hat - y) ** 2).mean()


a = tensor([-1., 1])
a = nn.Parameter(a)


def update():
    y_hat = x @ a
    loss = mse(y, y_hat)
    if t % 10 == 0: print(loss)
    loss.backward()
    with torch.no_grad():
        a.sub_(lr * a.grad)
        a.grad.zero_()


lr = 1e-1
for t in range(100): update()

plt.scatter(x[:, 0], y)
with torch.no_grad():
    plt.scatter(x[:, 0], x @ a)
plt.savefig("sgd.png")
