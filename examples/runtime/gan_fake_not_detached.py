"""Crash: the discriminator step backpropagates through the generator's output (no detach),
freeing that graph; the generator step then needs it again."""
import torch
import torch.nn as nn
import torch.nn.functional as F

G, D = nn.Linear(2, 2), nn.Linear(2, 1)
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
fake = G(torch.randn(4, 2))
opt_d.zero_grad()
d_loss = F.softplus(D(fake)).mean() + F.softplus(-D(torch.randn(4, 2))).mean()  # <- cause
d_loss.backward()
opt_d.step()
opt_g.zero_grad()
g_loss = F.softplus(-D(fake)).mean()
g_loss.backward()
opt_g.step()
