"""nanoGPT Block with the residual adds written `x += self.attn(self.ln_1(x))` (the PR's memory saving): the in-place add overwrites the x that ln_1 saved for backward.

source: https://github.com/karpathy/nanoGPT/pull/72
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float('-inf')), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x += self.attn(self.ln_1(x))  # ROOT
        x += self.mlp(self.ln_2(x))
        return x


torch.manual_seed(0)
vocab_size, block_size, n_embd = 50, 8, 32
wte = nn.Embedding(vocab_size, n_embd)
wpe = nn.Embedding(block_size, n_embd)
blocks = nn.ModuleList([Block(n_embd, 4) for _ in range(2)])
ln_f = nn.LayerNorm(n_embd)
lm_head = nn.Linear(n_embd, vocab_size, bias=False)
idx = torch.randint(0, vocab_size, (4, block_size))
targets = torch.randint(0, vocab_size, (4, block_size))
x = wte(idx) + wpe(torch.arange(block_size))
for block in blocks:
    x = block(x)
logits = lm_head(ln_f(x))
loss = F.cross_entropy(logits.view(-1, vocab_size), targets.view(-1))
loss.backward()  # SYMPTOM
