import torch
from models import make_gan
from steps import d_loss, g_loss

G, D = make_gan()
opt_g = torch.optim.Adam(G.parameters(), 2e-4)
opt_d = torch.optim.Adam(D.parameters(), 2e-4)
before = G[0].weight.clone()
for _ in range(3):
    z, real = torch.randn(8, 8), torch.randn(8, 4)
    opt_d.zero_grad()
    d_loss(G, D, z, real).backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss(G, D, z).backward()
    opt_g.step()
print("G moved:", not torch.equal(before, G[0].weight))
