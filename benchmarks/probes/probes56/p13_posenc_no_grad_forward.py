"""A tiny transformer whose learned positional table sits in its own module."""
import torch
import torch.nn as nn


class LearnedPositions(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(1, n, d))

    @torch.no_grad()  # ROOT
    def forward(self, x):
        return x + self.table[:, : x.size(1)]


class Tiny(nn.Module):
    def __init__(self, vocab=30, d=16, n=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = LearnedPositions(n, d)
        self.block = nn.TransformerEncoderLayer(d, 2, 32, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.block(self.pos(self.tok(ids))))


m = Tiny()
opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
for _ in range(3):
    ids = torch.randint(0, 30, (4, 12))
    loss = nn.functional.cross_entropy(m(ids).flatten(0, 1), ids.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
print("pos table moved:", m.pos.table.abs().sum().item(), "tok grad:", m.tok.weight.grad)
