import torch
import torch.nn as nn
import torch.nn.functional as F


class Experiment:
    def __init__(self, in_dim, n_cls):
        self.in_dim, self.n_cls = in_dim, n_cls
        self.model = self.build()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def build(self):
        return nn.Sequential(nn.Linear(self.in_dim, 16), nn.ReLU(), nn.Linear(16, self.n_cls))

    def reset(self):
        self.model = self.build()  # ROOT

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


exp = Experiment(5, 3)
exp.reset()
before = exp.model[0].weight.clone()
for _ in range(3):
    exp.step(torch.randn(4, 5), torch.randint(0, 3, (4,)))
print("moved:", not torch.equal(before, exp.model[0].weight))
