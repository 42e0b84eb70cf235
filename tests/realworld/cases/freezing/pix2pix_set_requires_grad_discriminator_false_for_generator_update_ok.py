"""pix2pix's optimize_parameters freezes the discriminator with set_requires_grad(self.netD, False) while updating the generator: the maintainers explain it only skips D's parameter gradients, the GAN loss still backpropagates through D into G (the generator gets a gradient, D's weights get none and are not stepped).

source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/651
kind: lookalike
"""
import torch
import torch.nn as nn


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss()

    def __call__(self, prediction, target_is_real):
        target = torch.ones_like(prediction) if target_is_real else torch.zeros_like(prediction)
        return self.loss(prediction, target)


class Pix2PixModel:
    def __init__(self):
        self.netG = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(6, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 1, 4, 1, 1))
        self.criterionGAN, self.criterionL1 = GANLoss(), nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        loss_D_fake = self.criterionGAN(self.netD(fake_AB.detach()), False)
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        loss_D_real = self.criterionGAN(self.netD(real_AB), True)
        self.loss_D = (loss_D_fake + loss_D_real) * 0.5
        self.loss_D.backward()

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        self.loss_G_GAN = self.criterionGAN(self.netD(fake_AB), True)
        self.loss_G = self.loss_G_GAN + self.criterionL1(self.fake_B, self.real_B) * 100.0
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


torch.manual_seed(0)
model = Pix2PixModel()
for step in range(3):
    model.set_input(torch.rand(2, 3, 16, 16) * 2 - 1, torch.rand(2, 3, 16, 16) * 2 - 1)
    model.optimize_parameters()
print(step, model.loss_D.item(), model.loss_G.item())
