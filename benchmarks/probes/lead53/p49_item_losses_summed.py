import torch
import torch.nn as nn


class MultiTaskLoss:
    def __init__(self, weights):
        self.weights = weights
        self.crit = nn.MSELoss()

    def __call__(self, outs, targets):
        terms = []
        for w, o, t in zip(self.weights, outs, targets):
            terms.append(w * self.crit(o, t).item())  # ROOT
        return sum(terms)


heads = nn.ModuleList([nn.Linear(4, 1) for _ in range(2)])
opt = torch.optim.SGD(heads.parameters(), lr=0.1)
loss_fn = MultiTaskLoss([1.0, 0.5])
x = torch.randn(6, 4)
ys = [torch.randn(6, 1), torch.randn(6, 1)]
for _ in range(2):
    opt.zero_grad()
    loss = loss_fn([h(x) for h in heads], ys)
    loss.backward()
    opt.step()
