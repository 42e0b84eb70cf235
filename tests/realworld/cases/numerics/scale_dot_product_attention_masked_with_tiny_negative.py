"""ScaleDotProductAttention fills masked scores with -e where e=1e-12, which is about 0, so padded keys keep their softmax weight.

source: https://github.com/hyunwoongko/transformer/issues/10
kind: bug
symptom: silent
verified: the 2 masked keys of 5 keep 0.38 of the attention weight on average; filling with -10000 gives 0.0
"""
import math

import torch
import torch.nn as nn


class ScaleDotProductAttention(nn.Module):
    def __init__(self):
        super(ScaleDotProductAttention, self).__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q, k, v, mask=None, e=1e-12):
        batch_size, head, length, d_tensor = k.size()
        score = (q @ k.transpose(2, 3)) / math.sqrt(d_tensor)
        if mask is not None:
            score = score.masked_fill(mask == 0, -e)  # ROOT
        score = self.softmax(score)
        return score @ v, score


torch.manual_seed(0)
w_q, w_k, w_v = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)
attention = ScaleDotProductAttention()
optimizer = torch.optim.Adam(list(w_q.parameters()) + list(w_k.parameters()) + list(w_v.parameters()), lr=1e-3)
x = torch.randn(2, 1, 5, 16)
mask = torch.ones(2, 1, 1, 5)
mask[:, :, :, 3:] = 0
out, score = attention(w_q(x), w_k(x), w_v(x), mask=mask)
loss = out.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(score[..., 3:].sum(-1).mean().item())
