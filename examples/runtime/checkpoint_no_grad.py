"""Silent: a reentrant checkpoint whose input does not require grad; the checkpointed block
never gets a gradient (torch only warns)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp

block, head = nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Linear(8, 1)
opt = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(3):
    opt.zero_grad()
    h = cp.checkpoint(block, x, use_reentrant=True)  # <- cause
    F.mse_loss(head(h), y).backward()
    opt.step()
