import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = []  # ROOT
        for a, b in zip(sizes[:-1], sizes[1:]):
            self.layers.append(nn.Linear(a, b))
        self.out = nn.Linear(sizes[-1], 1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return self.out(x)
