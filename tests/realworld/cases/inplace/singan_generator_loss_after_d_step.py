"""SinGAN on torch >= 1.5: several generator steps backpropagate through a fake made before optimizerG.step().

source: https://github.com/tamarott/SinGAN/issues/110
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 3, 3, padding=1))
netD = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=5e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=5e-4, betas=(0.5, 0.999))
real, noise = torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8)
Dsteps, Gsteps = 1, 2

for j in range(Dsteps):
    netD.zero_grad()
    errD_real = -netD(real).mean()
    errD_real.backward(retain_graph=True)
    fake = netG(noise)
    output = netD(fake.detach())
    errD_fake = output.mean()
    errD_fake.backward(retain_graph=True)
    optimizerD.step()

for j in range(Gsteps):
    netG.zero_grad()
    output = netD(fake)  # ROOT
    errG = -output.mean()
    errG.backward(retain_graph=True)  # SYMPTOM
    optimizerG.step()
