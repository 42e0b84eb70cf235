import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.hidden = [nn.Linear(a, b) for a, b in zip(dims[:-2], dims[1:-1])]  # ROOT
        self.out = nn.Linear(dims[-2], dims[-1])

    def forward(self, x):
        for layer in self.hidden:
            x = layer(x).relu()
        return self.out(x)
