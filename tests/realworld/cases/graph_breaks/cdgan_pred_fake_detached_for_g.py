"""Change-detection GAN: the generator's adversarial loss is computed on a detached discriminator output.

source: https://github.com/wangle53/CSA-CDGAN/issues/5
kind: bug
symptom: silent
verified: the generator's gradient comes from the reconstruction loss only
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
netg = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
netd = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
optimizer_g = torch.optim.Adam(netg.parameters(), lr=2e-4)
l_adv, l_con = nn.BCELoss(), nn.L1Loss()

x, gt = torch.randn(4, 8), torch.randn(4, 8)
fake = netg(x)
pred_fake = netd(fake).detach()  # ROOT
err_g_adv = l_adv(pred_fake, torch.ones(4, 1))
err_g_con = l_con(fake, gt)
err_g = err_g_adv + 50 * err_g_con
optimizer_g.zero_grad()
err_g.backward()
optimizer_g.step()
print(err_g_adv.requires_grad)
