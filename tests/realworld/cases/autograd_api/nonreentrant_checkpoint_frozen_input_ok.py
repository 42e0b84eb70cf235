"""Gradient checkpointing with use_reentrant=False: the block trains although its input needs no grad.

source: https://github.com/victorchall/EveryDream2trainer/issues/172
kind: lookalike
verified: block.weight.grad is set after backward
"""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
text_encoder = nn.Embedding(16, 8).requires_grad_(False)
block = nn.Linear(8, 8)
head = nn.Linear(8, 1)
optimizer = torch.optim.AdamW(list(block.parameters()) + list(head.parameters()), lr=1e-4)

input_ids = torch.randint(0, 16, (2, 5))
hidden = text_encoder(input_ids)
hidden = checkpoint(block, hidden, use_reentrant=False)
loss = head(torch.relu(hidden)).pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(block.weight.grad is not None)
