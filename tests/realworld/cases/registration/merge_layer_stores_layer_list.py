"""MergeLayer keeps the layers it is given in a Python list, so they are not trainable variables.

source: https://github.com/asyml/texar-pytorch/issues/72
kind: bug
symptom: silent
verified: merge._layers[0].weight never changes; merge.parameters() is empty
"""
import torch
import torch.nn as nn


class MergeLayer(nn.Module):
    def __init__(self, layers=None, mode='concat', dim=-1):
        super().__init__()
        self._mode = mode
        self._dim = dim
        self._layers = None
        if layers is not None:
            self._layers = []  # ROOT
            for layer in layers:
                self._layers.append(layer)

    def forward(self, inputs):
        outputs = [layer(inputs) for layer in self._layers]
        if self._mode == 'concat':
            return torch.cat(outputs, dim=self._dim)
        return torch.stack(outputs).sum(0)


torch.manual_seed(0)
branches = [nn.Linear(4, 3), nn.Linear(4, 3)]
merge = MergeLayer(branches)
head = nn.Linear(6, 1)
model = nn.Sequential(merge, head)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for _ in range(10):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
