"""Body unfrozen for the second stage, but the optimizer was created with only the trainable head.

source: https://github.com/fastai/fastai/issues/2133
kind: bug
symptom: silent
verified: learner.model[0].weight never changes after unfreeze()
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

    def freeze(self):
        requires_grad(self.layer_groups[0], False)
        self.create_opt(self.lr)

    def unfreeze(self):
        requires_grad(self.layer_groups[0], True)  # ROOT

    def fit(self, epochs, x, y):
        for _ in range(epochs):
            self.opt.zero_grad()
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            self.opt.step()


torch.manual_seed(0)
learner = Learner(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))
x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
learner.freeze()
learner.fit(2, x, y)
learner.unfreeze()
learner.fit(3, x, y)
