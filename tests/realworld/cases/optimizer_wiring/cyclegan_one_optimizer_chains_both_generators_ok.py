"""CycleGAN: optimizer_G = Adam(itertools.chain(netG_A.parameters(), netG_B.parameters())) holds both generators; the cycle loss goes through both, so one optimizer steps both correctly.

source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/1381
kind: lookalike
verified: both generators' weights change after optimizer_G.step(); the discriminators are frozen during the G step
"""
import itertools

import torch
import torch.nn as nn


def set_requires_grad(nets, requires_grad=False):
    for net in nets:
        for param in net.parameters():
            param.requires_grad = requires_grad


torch.manual_seed(0)
netG_A = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
netG_B = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
netD_A = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3))
netD_B = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3))
optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
criterionGAN, criterionCycle = nn.MSELoss(), nn.L1Loss()
gA_before, gB_before = netG_A[0].weight.clone(), netG_B[0].weight.clone()
real_A, real_B = torch.rand(2, 3, 16, 16), torch.rand(2, 3, 16, 16)

fake_B = netG_A(real_A)
rec_A = netG_B(fake_B)
fake_A = netG_B(real_B)
rec_B = netG_A(fake_A)
set_requires_grad([netD_A, netD_B], False)
optimizer_G.zero_grad()
pred_A, pred_B = netD_A(fake_B), netD_B(fake_A)
loss_G = (criterionGAN(pred_A, torch.ones_like(pred_A)) + criterionGAN(pred_B, torch.ones_like(pred_B))
          + 10.0 * criterionCycle(rec_A, real_A) + 10.0 * criterionCycle(rec_B, real_B))
loss_G.backward()
optimizer_G.step()
set_requires_grad([netD_A, netD_B], True)
optimizer_D.zero_grad()
pred_real, pred_fake = netD_A(real_B), netD_A(fake_B.detach())
loss_D_A = (criterionGAN(pred_real, torch.ones_like(pred_real)) + criterionGAN(pred_fake, torch.zeros_like(pred_fake))) * 0.5
loss_D_A.backward()
pred_real, pred_fake = netD_B(real_A), netD_B(fake_A.detach())
loss_D_B = (criterionGAN(pred_real, torch.ones_like(pred_real)) + criterionGAN(pred_fake, torch.zeros_like(pred_fake))) * 0.5
loss_D_B.backward()
optimizer_D.step()
print(not torch.equal(gA_before, netG_A[0].weight), not torch.equal(gB_before, netG_B[0].weight))
