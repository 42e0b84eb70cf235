"""EVA attention fills masked keys with -inf before the softmax, so padded keys get zero weight.

source: https://github.com/huggingface/pytorch-image-models/pull/2236
kind: lookalike
"""
import torch
import torch.nn as nn


class EvaAttention(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, attn_mask=None):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        if attn_mask is not None:
            attn_mask = attn_mask.to(torch.bool)
            attn = attn.masked_fill(~attn_mask[:, None, None, :], float("-inf"))
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


torch.manual_seed(0)
attn_block = EvaAttention()
head = nn.Linear(32, 5)
optimizer = torch.optim.AdamW(list(attn_block.parameters()) + list(head.parameters()), lr=1e-3)
x = torch.randn(2, 6, 32)
attn_mask = torch.ones(2, 6)
attn_mask[1, 4:] = 0
labels = torch.randint(0, 5, (2,))
out = attn_block(x, attn_mask)
loss = nn.functional.cross_entropy(head(out[:, 0]), labels)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item(), torch.isnan(attn_block.qkv.weight).any().item())
