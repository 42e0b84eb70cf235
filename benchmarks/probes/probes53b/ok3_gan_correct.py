import torch
import torch.nn as nn
import torch.nn.functional as F

G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
D = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g, opt_d = torch.optim.Adam(G.parameters(), 2e-4), torch.optim.Adam(D.parameters(), 2e-4)
for _ in range(2):
    z, real = torch.randn(8, 8), torch.randn(8, 4)
    fake = G(z)
    lr, lf = D(real), D(fake.detach())
    d_loss = F.binary_cross_entropy_with_logits(lr, torch.ones_like(lr)) + \
        F.binary_cross_entropy_with_logits(lf, torch.zeros_like(lf))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    logits = D(fake)
    g_loss = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
print("ok")
