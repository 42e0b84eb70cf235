"""Silent: the encoder output is detached, so the encoder (which is in the optimizer) never
gets a gradient; only the head trains."""
import torch
import torch.nn as nn
import torch.nn.functional as F

encoder, head = nn.Linear(8, 4), nn.Linear(4, 1)
opt = torch.optim.SGD(list(encoder.parameters()) + list(head.parameters()), lr=0.1)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(5):
    opt.zero_grad()
    feats = torch.relu(encoder(x)).detach()  # <- cause
    F.mse_loss(head(feats), y).backward()
    opt.step()
