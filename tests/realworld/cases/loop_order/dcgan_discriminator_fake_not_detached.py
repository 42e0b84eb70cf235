"""DCGAN without .detach(): the discriminator step backpropagates through netG, then errG.backward() fails.

source: https://github.com/pytorch/examples/issues/116
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn

nz = 4
torch.manual_seed(0)
netG = nn.Sequential(nn.Linear(nz, 8), nn.Tanh())
netD = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_label, fake_label = 1., 0.
dataloader = [torch.randn(4, 8) for _ in range(2)]
for i, real_cpu in enumerate(dataloader):
    netD.zero_grad()
    batch_size = real_cpu.size(0)
    label = torch.full((batch_size,), real_label)
    output = netD(real_cpu).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()
    noise = torch.randn(batch_size, nz)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake).view(-1)  # ROOT
    errD_fake = criterion(output, label)
    errD_fake.backward()
    optimizerD.step()

    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()  # SYMPTOM
    optimizerG.step()
