"""Grokfast gradfilter_ema walks model.named_parameters() and reads p.grad.data for every parameter that requires grad; a parameter that was initialized but takes no part in the loss has p.grad None after backward, so the filter fails on it.

source: https://github.com/ironjr/grokfast/pull/3
kind: bug
symptom: crash
verified: 'NoneType' object has no attribute 'data'
"""
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def gradfilter_ema(
    m: nn.Module,
    grads: Optional[Dict[str, torch.Tensor]] = None,
    alpha: float = 0.98,
    lamb: float = 2.0,
) -> Dict[str, torch.Tensor]:
    if grads is None:
        grads = {n: p.grad.data.detach() for n, p in m.named_parameters() if p.requires_grad}  # ROOT

    for n, p in m.named_parameters():
        if p.requires_grad:
            grads[n] = grads[n] * alpha + p.grad.data.detach() * (1 - alpha)
            p.grad.data = p.grad.data + grads[n] * lamb

    return grads


class Decoder(nn.Module):
    def __init__(self, dim=16, num_tokens=10, seq_len=4):
        super().__init__()
        self.token_embeddings = nn.Embedding(num_tokens, dim)
        self.position_embeddings = nn.Embedding(seq_len, dim)
        self.aux_head = nn.Linear(dim, num_tokens)
        self.layer = nn.TransformerEncoderLayer(dim, 2, 2 * dim, 0.0, batch_first=True)
        self.head = nn.Linear(dim, num_tokens)

    def forward(self, x):
        h = self.token_embeddings(x) + self.position_embeddings(torch.arange(x.size(1)))
        return self.head(self.layer(h))


torch.manual_seed(0)
model = Decoder()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1.0)
grads = None
for step in range(3):
    inputs, labels = torch.randint(0, 10, (8, 4)), torch.randint(0, 10, (8,))
    output = model(inputs)[:, -1]
    loss = F.cross_entropy(output, labels)
    optimizer.zero_grad()
    loss.backward()
    grads = gradfilter_ema(model, grads=grads, alpha=0.98, lamb=2.0)  # SYMPTOM
    optimizer.step()
