"""DCGAN written from the example without the detach: the generator step backpropagates a freed graph.

source: https://github.com/pytorch/examples/issues/116
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
nz = 8
netG = nn.Sequential(nn.Linear(nz, 16), nn.ReLU(), nn.Linear(16, 12), nn.Tanh())
netD = nn.Sequential(nn.Linear(12, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_label, fake_label = 1.0, 0.0

for i in range(2):
    real = torch.randn(4, 12)
    netD.zero_grad()
    label = torch.full((4,), real_label)
    errD_real = criterion(netD(real).view(-1), label)
    errD_real.backward()
    noise = torch.randn(4, nz)
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
