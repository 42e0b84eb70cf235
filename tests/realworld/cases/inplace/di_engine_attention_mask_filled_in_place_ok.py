"""DI-engine Attention.forward after the fix: score.masked_fill_(~mask, -1e9) writes the mask into the scores in place, so the softmax gives the padded positions no weight.

source: https://github.com/opendilab/DI-engine/issues/333
kind: lookalike
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, input_dim=16, head_dim=8, output_dim=16, head_num=2, dropout=0.0):
        super(Attention, self).__init__()
        self.head_num = head_num
        self.head_dim = head_dim
        self.dropout = nn.Dropout(dropout)
        self.attention_pre = nn.Linear(input_dim, head_dim * head_num * 3)
        self.project = nn.Linear(head_dim * head_num, output_dim)

    def split(self, x, T=False):
        B, N = x.shape[:2]
        x = x.view(B, N, self.head_num, self.head_dim)
        x = x.permute(0, 2, 1, 3).contiguous()
        if T:
            x = x.permute(0, 1, 3, 2).contiguous()
        return x

    def forward(self, x, mask=None):
        assert (len(x.shape) == 3)
        B, N = x.shape[:2]
        x = self.attention_pre(x)
        query, key, value = torch.chunk(x, 3, dim=2)
        query, key, value = self.split(query), self.split(key, T=True), self.split(value)
        score = torch.matmul(query, key)
        score /= math.sqrt(self.head_dim)
        if mask is not None:
            score.masked_fill_(~mask, -1e9)
        score = F.softmax(score, dim=-1)
        self.last_score = score
        score = self.dropout(score)
        attention = torch.matmul(score, value)
        attention = attention.permute(0, 2, 1, 3).contiguous()
        attention = self.project(attention.view(B, N, -1))
        return attention


torch.manual_seed(0)
attn = Attention()
x = torch.randn(1, 5, 16)
mask = torch.tensor([True, True, True, False, False]).view(1, 1, 1, 5)
out1 = attn(x, mask)
pad_weight = attn.last_score[..., 3:].sum(-1).max().item()
x2 = x.clone()
x2[:, 3:] = torch.randn(1, 2, 16)
out2 = attn(x2, mask)
loss = out1.pow(2).mean()
loss.backward()
print((out1[:, :3] - out2[:, :3]).abs().max().item(), pad_weight)
