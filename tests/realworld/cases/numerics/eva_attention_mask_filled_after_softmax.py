"""EVA attention fills masked keys with -inf after the softmax instead of before it, so padded batches produce NaN outputs.

source: https://github.com/huggingface/pytorch-image-models/pull/2236
kind: bug
symptom: silent
verified: one padded sample makes the loss NaN and the qkv weights NaN after one AdamW step; filling before the softmax gives loss 1.70 and finite weights
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
        attn = attn.softmax(dim=-1)
        if attn_mask is not None:
            attn_mask = attn_mask.to(torch.bool)
            attn = attn.masked_fill(~attn_mask[:, None, None, :], float("-inf"))  # ROOT
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
