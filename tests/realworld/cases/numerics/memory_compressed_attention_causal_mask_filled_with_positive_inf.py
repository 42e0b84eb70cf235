"""Causal attention fills the masked scores with -float('-inf'), which is +inf, before the softmax.

source: https://github.com/lucidrains/memory-compressed-attention/issues/2
kind: bug
symptom: silent
verified: every attention row with a masked key is NaN, so the loss and every gradient are NaN
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import einsum

torch.manual_seed(0)


class MemoryCompressedAttention(nn.Module):
    def __init__(self, dim, heads=2, causal=True):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.causal = causal
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d, h = *x.shape, self.heads
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, h, -1).transpose(1, 2) for t in (q, k, v))
        dots = einsum('bhid,bhjd->bhij', q, k) * self.scale
        if self.causal:
            mask = torch.ones(n, n).triu_(1).bool()
            dots = dots.masked_fill(mask, -float('-inf'))  # ROOT
        attn = dots.softmax(dim=-1)
        out = einsum('bhij,bhjd->bhid', attn, v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, d))


attn = MemoryCompressedAttention(16)
optimizer = torch.optim.Adam(attn.parameters(), lr=1e-3)
x = torch.randn(2, 6, 16)
loss = F.mse_loss(attn(x), x)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item(), attn.to_out.weight.isnan().any().item())
