"""The forum user's fit of a linear map `t` and offset `a` written as the thread's working variant: the product `t @ a` is evaluated inside every step (`x_out = t @ (x + t @ a)`), so each iteration builds its whole graph anew, `loss.backward()` succeeds every time and the loss goes down.

source: https://discuss.pytorch.org/t/backpropagation-graph-is-reused-while-it-shouldnt/24554
kind: lookalike
"""
import torch

measure = torch.nn.MSELoss()

x = torch.tensor([1, 0], dtype=torch.float64)
t = torch.eye(2, dtype=torch.float64, requires_grad=True)
a = torch.ones(2, dtype=torch.float64, requires_grad=True)


def step(optimizer):
    optimizer.zero_grad()
    x_out = t @ (x + t @ a)
    loss = measure(x_out, x)
    loss.backward()
    optimizer.step()
    return loss.item()


optimizer = torch.optim.SGD([t, a], lr=0.05)
for it in range(20):
    loss = step(optimizer)
print("loss %.5f" % loss)
