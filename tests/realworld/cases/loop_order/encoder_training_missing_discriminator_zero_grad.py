"""In-domain GAN inversion: the encoder loop zeroes the encoder's gradients but not the discriminator's.

source: https://github.com/Hsintien-Ng/idinvert_pytorch-reproduced/issues/1
kind: bug
symptom: silent
verified: D.fc.weight.grad holds the discriminator gradients of every iteration summed
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Linear(4, 8)
E = nn.Linear(8, 4)
D = nn.Sequential()
D.add_module('fc', nn.Linear(8, 1))
for p in G.parameters():
    p.requires_grad_(False)
optimizer_E = torch.optim.Adam(E.parameters(), lr=1e-4, betas=(0.9, 0.99))
optimizer_D = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.9, 0.99))
x = torch.randn(8, 8)
for it in range(6):
    x_rec = G(E(x))
    x_real = D(x)
    x_fake = D(x_rec.detach())
    loss_real = nn.functional.softplus(-x_real).mean()
    loss_fake = nn.functional.softplus(x_fake).mean()
    loss_D = loss_real + loss_fake
    loss_D.backward()  # ROOT
    optimizer_D.step()

    loss_pix = torch.mean((x - x_rec) ** 2)
    loss_adv = nn.functional.softplus(-D(x_rec)).mean()
    loss_E = loss_pix + 0.08 * loss_adv
    optimizer_E.zero_grad()
    loss_E.backward()
    optimizer_E.step()
