"""ALI: the encoder looks left out, but optimizerG holds both netE and netG as two parameter groups.

source: https://github.com/9310gaurav/ali-pytorch/issues/5
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim

lr = 1e-4
nz = 8
netE = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.1), nn.Linear(32, nz))
netG = nn.Sequential(nn.Linear(nz, 32), nn.LeakyReLU(0.1), nn.Linear(32, 16))
netD = nn.Sequential(nn.Linear(16 + nz, 32), nn.LeakyReLU(0.1), nn.Linear(32, 1))
optimizerG = optim.Adam([{'params': netE.parameters()},
                         {'params': netG.parameters()}], lr=lr, betas=(0.5, 0.999))
optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()

torch.manual_seed(0)
for i in range(3):
    real = torch.randn(8, 16)
    z_fake = torch.randn(8, nz)
    z_real, x_fake = netE(real), netG(z_fake)
    d_true = netD(torch.cat([real, z_real.detach()], 1))
    d_false = netD(torch.cat([x_fake.detach(), z_fake], 1))
    loss_d = criterion(d_true, torch.ones_like(d_true)) + criterion(d_false, torch.zeros_like(d_false))
    optimizerD.zero_grad()
    loss_d.backward()
    optimizerD.step()
    d_true = netD(torch.cat([real, z_real], 1))
    d_false = netD(torch.cat([x_fake, z_fake], 1))
    loss_g = criterion(d_false, torch.ones_like(d_false)) + criterion(d_true, torch.zeros_like(d_true))
    optimizerG.zero_grad()
    loss_g.backward()
    optimizerG.step()
