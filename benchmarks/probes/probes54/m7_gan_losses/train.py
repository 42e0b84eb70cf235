import torch
from losses import discriminator_loss, generator_loss
from nets import discriminator, generator

G, D = generator(), discriminator()
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
for step in range(2):
    real = torch.randn(8, 4)
    fake = G(torch.randn(8, 8))
    opt_d.zero_grad()
    discriminator_loss(D, real, fake).backward()
    opt_d.step()
    opt_g.zero_grad()
    generator_loss(D, fake).backward()
    opt_g.step()
