import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Linear(d, d)

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    def __init__(self, d=8, depth=2, n_out=3):
        super().__init__()
        self.stem = nn.Linear(4, d)
        self.layers = nn.ModuleList(Block(d) for _ in range(depth))
        self.head = nn.Linear(d, n_out)

    def forward(self, x):
        x = self.stem(x)
        for blk in self.layers:
            x = blk(x)
        return self.head(x)
