"""A forum user fits a small linear map `t` and offset `a` and, to avoid recomputing it, evaluates `y = t @ a` once before the loop; every iteration's loss then reaches back into that one product, whose saved tensors were freed by the first `loss.backward()`, so the second iteration fails although each iteration builds a fresh `x_out` and `loss`.

source: https://discuss.pytorch.org/t/backpropagation-graph-is-reused-while-it-shouldnt/24554
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch

measure = torch.nn.MSELoss()

x = torch.tensor([1, 0], dtype=torch.float64)
t = torch.eye(2, dtype=torch.float64, requires_grad=True)
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
y = t @ a  # ROOT


def step(optimizer):
    optimizer.zero_grad()
    x_out = t @ (x + y)
    loss = measure(x_out, x)
    loss.backward()  # SYMPTOM
    optimizer.step()
    return loss.item()


optimizer = torch.optim.SGD([t, a], lr=0.05)
for it in range(20):
    loss = step(optimizer)
print("loss %.5f" % loss)
