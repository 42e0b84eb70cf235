"""DeBERTa-style attention: scores are masked before the softmax, and a later out-of-place masked_fill whose result is unused changes nothing.

source: https://github.com/huggingface/transformers/pull/35182
kind: lookalike
"""
import torch
import torch.nn as nn


class DisentangledSelfAttention(nn.Module):
    def __init__(self, hidden=16, heads=2):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.in_proj = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, hidden_states, attention_mask):
        b, n, _ = hidden_states.shape
        q, k, v = self.in_proj(hidden_states).view(b, n, 3, self.heads, self.d).permute(2, 0, 3, 1, 4)
        attention_scores = q @ k.transpose(-1, -2) / self.d ** 0.5
        attention_scores = attention_scores.masked_fill(~attention_mask, torch.finfo(q.dtype).min)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs.masked_fill(attention_mask, 0)
        context = (attention_probs @ v).transpose(1, 2).reshape(b, n, -1)
        return self.out(context)


torch.manual_seed(0)
layer = DisentangledSelfAttention()
optimizer = torch.optim.AdamW(layer.parameters(), lr=1e-3)
x = torch.randn(2, 5, 16)
attention_mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
attention_mask[1, :, :, 3:] = False
for it in range(3):
    loss = layer(x, attention_mask).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
