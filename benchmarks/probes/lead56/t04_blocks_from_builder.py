"""A residual MLP whose blocks come from a builder function returning a plain list."""
import torch
import torch.nn as nn


def make_blocks(width, depth):
    return [nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth)]


class ResMLP(nn.Module):
    def __init__(self, width=16, depth=3):
        super().__init__()
        self.inp = nn.Linear(4, width)
        self.blocks = make_blocks(width, depth)  # ROOT
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        h = self.inp(x)
        for blk in self.blocks:
            h = h + blk(h)
        return self.head(h)


if __name__ == "__main__":
    model = ResMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
