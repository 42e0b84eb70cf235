"""Attention gate: padded positions of the sigmoid output are zeroed in place."""
import torch
import torch.nn as nn


class GatedPool(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def gate(self, x, pad_mask):
        g = torch.sigmoid(self.score(x)).squeeze(-1)
        g[pad_mask] = 0.0  # ROOT
        return g

    def forward(self, x, pad_mask):
        g = self.gate(x, pad_mask)
        return (g.unsqueeze(-1) * x).sum(1) / g.sum(1, keepdim=True).clamp(min=1e-6)


if __name__ == "__main__":
    torch.manual_seed(0)
    pool = GatedPool()
    clf = nn.Linear(8, 2)
    opt = torch.optim.Adam(list(pool.parameters()) + list(clf.parameters()), lr=1e-3)
    x = torch.randn(4, 6, 8)
    pad = torch.zeros(4, 6, dtype=torch.bool)
    pad[:, 4:] = True
    loss = nn.functional.cross_entropy(clf(pool(x, pad)), torch.tensor([0, 1, 0, 1]))
    opt.zero_grad()
    loss.backward()  # SYMPTOM
    opt.step()
