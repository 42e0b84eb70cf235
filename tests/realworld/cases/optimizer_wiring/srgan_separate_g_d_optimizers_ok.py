"""SRGAN: netD is trained on fake_H.detach() and only optimizer_D (over netD) steps after loss_D.

source: https://github.com/XPixelGroup/BasicSR/issues/17
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
netG = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1))
netD = nn.Sequential(nn.Conv2d(3, 1, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
optimizer_G = torch.optim.Adam(netG.parameters(), lr=1e-4, betas=(0.9, 0.999))
optimizer_D = torch.optim.Adam(netD.parameters(), lr=1e-4, betas=(0.9, 0.999))
cri_gan = nn.BCEWithLogitsLoss()
var_L, var_ref = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
for step in range(5):
    optimizer_G.zero_grad()
    fake_H = netG(var_L)
    pred_g_fake = netD(fake_H)
    l_g_total = nn.functional.l1_loss(fake_H, var_ref) + 1e-3 * cri_gan(pred_g_fake, torch.ones_like(pred_g_fake))
    l_g_total.backward()
    optimizer_G.step()

    optimizer_D.zero_grad()
    pred_d_real = netD(var_ref)
    pred_d_fake = netD(fake_H.detach())
    l_d_total = cri_gan(pred_d_real, torch.ones_like(pred_d_real)) + cri_gan(pred_d_fake, torch.zeros_like(pred_d_fake))
    l_d_total.backward()
    optimizer_D.step()
