"""DeblurGAN updates D with loss_D.backward(retain_graph=True) because loss_G.backward() a few lines later reuses the same output graph.

source: https://github.com/VITA-Group/DeblurGANv2/issues/19
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
netD = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2), nn.LeakyReLU(0.2), nn.Flatten(), nn.LazyLinear(1))
inputs, targets = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)
outputs = netG(inputs)
netD(targets)
optimizer_G = torch.optim.Adam(netG.parameters(), lr=1e-4)
optimizer_D = torch.optim.Adam(netD.parameters(), lr=1e-4)

optimizer_D.zero_grad()
loss_D = torch.relu(1 - netD(targets)).mean() + torch.relu(1 + netD(outputs)).mean()
loss_D.backward(retain_graph=True)
optimizer_D.step()

optimizer_G.zero_grad()
loss_content = nn.functional.l1_loss(outputs, targets)
loss_adv = -netD(outputs).mean()
loss_G = loss_content + 0.001 * loss_adv
loss_G.backward()
optimizer_G.step()
