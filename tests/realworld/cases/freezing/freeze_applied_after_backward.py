"""A modifier sets requires_grad=False at optimizer-step time, after backward already filled .grad.

source: https://github.com/neuralmagic/sparseml/issues/965
kind: bug
symptom: silent
verified: model.embed.weight is updated by the first step although it is listed as frozen
"""
import torch
import torch.nn as nn


class TrainableParamsModifier:
    def __init__(self, params):
        self.params = params

    def apply(self, module):
        for name, param in module.named_parameters():
            if name in self.params:
                param.requires_grad = False


class ScheduledOptimizer:
    def __init__(self, optimizer, module, modifier):
        self.optimizer = optimizer
        self.module = module
        self.modifier = modifier

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self):
        self.modifier.apply(self.module)  # ROOT
        self.optimizer.step()


torch.manual_seed(0)
model = nn.Sequential()
model.add_module('embed', nn.Linear(8, 8))
model.add_module('head', nn.Linear(8, 2))
modifier = TrainableParamsModifier(['embed.weight', 'embed.bias'])
optimizer = ScheduledOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model, modifier)
x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
for _ in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
