"""Shift-Net's `backward_G` for the relativistic average GAN (`gan_type='re_avg_gan'`) builds the generator's adversarial loss from `self.pred_fake`, the discriminator's prediction stored by `backward_D` on the detached fake image, instead of the `pred_fake` it has just computed: `backward_D` already freed that graph with `loss_D.backward()`, so the generator's backward runs into it and the first training iteration fails.

source: https://github.com/Zhaoyi-Yan/Shift-Net_pytorch/issues/34
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
from types import SimpleNamespace

import torch
import torch.nn as nn


class GANLoss(nn.Module):
    def __init__(self, gan_type='re_avg_gan'):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss() if gan_type in ('re_s_gan', 're_avg_gan') else nn.MSELoss()

    def forward(self, prediction, target_is_real):
        target = torch.ones_like(prediction) if target_is_real else torch.zeros_like(prediction)
        return self.loss(prediction, target)


class ShiftNetModel:
    def __init__(self, opt):
        self.opt = opt
        self.netG = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 1, 4, 2, 1))
        self.criterionGAN = GANLoss(gan_type=opt.gan_type)
        self.criterionL1 = nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=opt.lr, betas=(0.5, 0.999))

    def set_input(self, real, mask):
        self.real_B, self.mask = real, mask
        self.real_A = real * (1 - mask)

    def set_requires_grad(self, net, requires_grad):
        for p in net.parameters():
            p.requires_grad = requires_grad

    def forward(self):
        self.fake_B = self.netG(torch.cat([self.real_A, self.mask], dim=1))

    def backward_D(self):
        fake_AB = self.fake_B
        real_AB = self.real_B  # GroundTruth
        self.pred_fake = self.netD(fake_AB.detach())
        self.pred_real = self.netD(real_AB)
        self.loss_D = (self.criterionGAN(self.pred_real - torch.mean(self.pred_fake), True)
                       + self.criterionGAN(self.pred_fake - torch.mean(self.pred_real), False)) / 2.
        self.loss_D.backward()

    def backward_G(self):
        # First, G(A) should fake the discriminator
        fake_AB = self.fake_B
        pred_fake = self.netD(fake_AB)
        self.pred_real = self.netD(self.real_B)
        self.loss_G_GAN = (self.criterionGAN(self.pred_real - torch.mean(self.pred_fake), False)  # ROOT
                           + self.criterionGAN(self.pred_fake - torch.mean(self.pred_real), True)) / 2.
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.opt.lambda_A
        self.loss_G = self.loss_G_L1 + self.loss_G_GAN * self.opt.gan_weight
        self.loss_G.backward()  # SYMPTOM

    def optimize_parameters(self):
        self.forward()
        # update D
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        # update G
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


opt = SimpleNamespace(gan_type='re_avg_gan', lr=2e-4, lambda_A=100.0, gan_weight=0.2)
torch.manual_seed(0)
model = ShiftNetModel(opt)
for it in range(3):
    real = torch.rand(4, 3, 16, 16) * 2 - 1
    mask = torch.zeros(4, 1, 16, 16)
    mask[:, :, 4:12, 4:12] = 1.0  # the hole to inpaint
    model.set_input(real, mask)
    model.optimize_parameters()
    print(f"iter {it}: loss_D {model.loss_D.item():.4f}, loss_G {model.loss_G.item():.4f}")
