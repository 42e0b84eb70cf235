"""Gradient checkpointing with the reentrant implementation on a block whose input needs no grad.

source: https://github.com/victorchall/EveryDream2trainer/issues/172
kind: bug
symptom: silent
verified: UserWarning: None of the inputs have requires_grad=True; block.weight.grad stays None
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
hidden = checkpoint(block, hidden, use_reentrant=True)  # ROOT
loss = head(torch.relu(hidden)).pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(block.weight.grad)
