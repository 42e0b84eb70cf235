"""freeze_to() changes which layer groups train and re-creates the optimizer over the trainable parameters.

source: https://github.com/fastai/fastai/issues/2133
kind: lookalike
"""
import torch
import torch.nn as nn


def requires_grad(m, b):
    for p in m.parameters():
        p.requires_grad_(b)


class Learner:
    def __init__(self, model, lr=0.1):
        self.model = model
        self.layer_groups = [model[0], model[2]]
        self.lr = lr
        self.opt = None

    def create_opt(self, lr):
        self.opt = torch.optim.SGD([p for p in self.model.parameters() if p.requires_grad], lr=lr)

    def freeze_to(self, n):
        for g in self.layer_groups[:n]:
            requires_grad(g, False)
        for g in self.layer_groups[n:]:
            requires_grad(g, True)
        self.create_opt(self.lr)

    def freeze(self):
        self.freeze_to(-1)

    def unfreeze(self):
        self.freeze_to(0)

    def fit(self, epochs, x, y):
        for _ in range(epochs):
            self.opt.zero_grad()
            nn.functional.cross_entropy(self.model(x), y).backward()
            self.opt.step()


torch.manual_seed(0)
learner = Learner(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))
x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
learner.freeze()
learner.fit(2, x, y)
learner.unfreeze()
learner.fit(3, x, y)
