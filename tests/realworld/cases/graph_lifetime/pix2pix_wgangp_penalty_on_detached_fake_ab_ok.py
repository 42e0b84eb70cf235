"""pix2pix with WGAN-GP, D updated several times per forward(), where cal_gradient_penalty gets fake_AB.detach(): the discriminator losses stay off netG's graph, which is kept for backward_G.

source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/439
kind: lookalike
verified: two iterations of 2 D updates and 1 G update run
"""
import torch
import torch.nn as nn


def cal_gradient_penalty(netD, real_data, fake_data, lambda_gp=10.0):
    alpha = torch.rand(real_data.shape[0], 1, 1, 1).expand_as(real_data)
    interpolatesv = alpha * real_data + ((1 - alpha) * fake_data)
    interpolatesv.requires_grad_(True)
    disc_interpolates = netD(interpolatesv)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolatesv,
                                    grad_outputs=torch.ones_like(disc_interpolates),
                                    create_graph=True, retain_graph=True, only_inputs=True)
    gradients = gradients[0].view(real_data.size(0), -1)
    gradient_penalty = (((gradients + 1e-16).norm(2, dim=1) - 1) ** 2).mean() * lambda_gp
    return gradient_penalty, gradients


class Pix2PixModel:
    def __init__(self, n_critic=2):
        self.netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(6, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4))
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.n_critic = n_critic

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = pred_fake.mean()
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = -pred_real.mean()
        self.gradient_penalty, self.gradients = cal_gradient_penalty(self.netD, real_AB, fake_AB.detach())
        self.loss_D = self.loss_D_fake + self.loss_D_real + self.gradient_penalty
        self.loss_D.backward()

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        self.loss_G = -self.netD(fake_AB).mean() + 100.0 * (self.fake_B - self.real_B).abs().mean()
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        for _ in range(self.n_critic):
            self.optimizer_D.zero_grad()
            self.backward_D()
            self.optimizer_D.step()
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


torch.manual_seed(0)
model = Pix2PixModel()
for i in range(2):
    model.set_input(torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16))
    model.optimize_parameters()
