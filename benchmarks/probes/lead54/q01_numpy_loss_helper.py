import numpy as np
import torch
import torch.nn as nn
from dataclasses import dataclass, field


def robust_l1(pred, target):
    diff = np.abs(pred.detach().numpy() - target.numpy())  # ROOT
    return torch.tensor(diff.mean(), requires_grad=True)  # ROOT


@dataclass
class Experiment:
    model: nn.Module
    lr: float = 0.05
    history: list = field(default_factory=list)

    def __post_init__(self):
        self.opt = torch.optim.SGD(self.model.parameters(), lr=self.lr)

    def fit_batch(self, x, y):
        self.opt.zero_grad()
        loss = robust_l1(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.history.append(loss.item())


exp = Experiment(nn.Linear(4, 1))
before = exp.model.weight.clone()
for _ in range(5):
    x = torch.randn(8, 4)
    exp.fit_batch(x, x.sum(1, keepdim=True))
print("moved:", not torch.equal(before, exp.model.weight))
