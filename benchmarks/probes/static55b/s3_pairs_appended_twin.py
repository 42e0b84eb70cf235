import torch
import torch.nn as nn


class Branches(nn.Module):
    def __init__(self, keys):
        super().__init__()
        self.stem = nn.Linear(6, 8)
        self.branches = []
        for k in keys:
            self.branches.append((k, nn.Linear(8, 1)))

    def forward(self, x):
        h = self.stem(x)
        return torch.cat([b(h) for _, b in self.branches], 1)


net = Branches(["a", "b"])
print(len(list(net.parameters())))
