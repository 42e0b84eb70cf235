"""BicycleGAN with use_same_D: backward_D runs twice on one netD; each loss has its own graph, the grads add up.

source: https://github.com/junyanz/BicycleGAN/issues/93
kind: lookalike
verified: both backward calls succeed; every netD parameter receives a gradient from both losses
"""
import torch
import torch.nn as nn


class BiCycleGANModel:
    def __init__(self):
        self.netG = nn.Sequential(nn.Linear(4 + 2, 8), nn.Tanh())
        self.netD = nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.criterionGAN = nn.MSELoss()

    def backward_D(self, netD, real, fake):
        pred_fake = netD(fake.detach())
        pred_real = netD(real)
        loss_D_fake = self.criterionGAN(pred_fake, torch.zeros_like(pred_fake))
        loss_D_real = self.criterionGAN(pred_real, torch.ones_like(pred_real))
        loss_D = loss_D_fake + loss_D_real
        loss_D.backward()
        return loss_D

    def update_D(self, real_data_encoded, real_data_random, real_A, z_encoded, z_random):
        self.fake_data_encoded = self.netG(torch.cat([real_A, z_encoded], 1))
        self.fake_data_random = self.netG(torch.cat([real_A, z_random], 1))
        self.optimizer_D.zero_grad()
        self.loss_D = self.backward_D(self.netD, real_data_encoded, self.fake_data_encoded)
        self.loss_D2 = self.backward_D(self.netD, real_data_random, self.fake_data_random)
        self.optimizer_D.step()


torch.manual_seed(0)
model = BiCycleGANModel()
args = (torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 4), torch.randn(4, 2), torch.randn(4, 2))
model.update_D(*args)
print(model.loss_D.item(), model.loss_D2.item(), all(p.grad is not None for p in model.netD.parameters()))
