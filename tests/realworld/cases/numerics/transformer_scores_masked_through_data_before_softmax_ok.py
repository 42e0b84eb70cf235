"""Scaled dot-product attention masks padded keys with attn.data.masked_fill_(mask, -inf) before the softmax; the gradients are those of masked_fill.

source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/16
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn


class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_model, attn_dropout=0.0):
        super().__init__()
        self.temper = np.power(d_model, 0.5)
        self.dropout = nn.Dropout(attn_dropout)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q, k, v, attn_mask=None):
        attn = torch.bmm(q, k.transpose(1, 2)) / self.temper
        if attn_mask is not None:
            attn.data.masked_fill_(attn_mask, -float('inf'))
        attn = self.softmax(attn)
        attn = self.dropout(attn)
        return torch.bmm(attn, v), attn


torch.manual_seed(0)
proj = nn.Linear(8, 24)
attention = ScaledDotProductAttention(8)
optimizer = torch.optim.Adam(proj.parameters(), lr=1e-3)
x = torch.randn(2, 6, 8)
attn_mask = torch.zeros(2, 6, 6, dtype=torch.bool)
attn_mask[0, :, 4:] = True
for it in range(3):
    q, k, v = proj(x).chunk(3, dim=-1)
    output, attn = attention(q, k, v, attn_mask=attn_mask)
    loss = output.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(attn[0, 0])
