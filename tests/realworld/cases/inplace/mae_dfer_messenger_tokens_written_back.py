"""MAE-DFER's LGI block attends over x[:, 0] (a view) and writes the result back into x[:, 0]; backward fails.

source: https://github.com/sunlicai/MAE-DFER/issues/15
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class LGIBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.first_attn_norm0, self.first_attn = nn.LayerNorm(dim), Attention(dim)
        self.second_attn_norm0, self.second_attn = nn.LayerNorm(dim), Attention(dim)
        self.third_attn_norm0, self.third_attn = nn.LayerNorm(dim), Attention(dim)
        self.drop_path = nn.Identity()

    def forward(self, x, b):
        bn, s, c = x.shape
        n = bn // b
        x = x + self.drop_path(self.first_attn(self.first_attn_norm0(x)))
        messenger_tokens = x[:, 0].reshape(b, n, c)  # ROOT
        messenger_tokens = messenger_tokens + self.drop_path(self.second_attn(self.second_attn_norm0(messenger_tokens)))
        x[:, 0] = messenger_tokens.reshape(b * n, c)
        x = x + self.drop_path(self.third_attn(self.third_attn_norm0(x)))
        return x


torch.manual_seed(0)
block = LGIBlock(dim=8)
head = nn.Linear(8, 7)
optimizer = torch.optim.AdamW(list(block.parameters()) + list(head.parameters()), lr=1e-3)
b, n, s = 2, 4, 5
tokens, labels = torch.randn(b * n, s, 8), torch.randint(0, 7, (b,))
out = block(tokens, b)
logits = head(out[:, 0].reshape(b, n, 8).mean(1))
loss = nn.functional.cross_entropy(logits, labels)
loss.backward()  # SYMPTOM
optimizer.step()
