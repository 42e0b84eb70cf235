"""An MLP built as [nn.Linear(100, 100), nn.ReLU()] * 10: the list repeats one Linear object, so the ten hidden layers share a single weight.

source: https://github.com/tfjgeorge/nngeometry/issues/60
kind: bug
symptom: silent
verified: the model has 3 Linear weights, not 12 (len(list(model.parameters())) == 6); every hidden step uses layers[3].weight
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
layers = ([nn.Flatten(), nn.Linear(28 * 28, 100), nn.ReLU()] +
          [nn.Linear(100, 100), nn.ReLU()] * 10 +  # ROOT
          [nn.Linear(100, 10)])
model = nn.Sequential(*layers)

optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
for _ in range(2):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(len(list(model.parameters())))
