"""pytorch-CycleGAN-and-pix2pix with --gan_mode wgangp and the gradient penalty the issue asks for: backward_D adds networks.cal_gradient_penalty(netD, real_AB, fake_AB.detach(), ...) to loss_D.

source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/1201
kind: lookalike
"""
import torch
import torch.nn as nn


def cal_gradient_penalty(netD, real_data, fake_data, device, type='mixed', constant=1.0, lambda_gp=10.0):
    alpha = torch.rand(real_data.shape[0], 1, device=device)
    alpha = alpha.expand(real_data.shape[0], real_data.nelement() // real_data.shape[0]).contiguous().view(*real_data.shape)
    interpolatesv = (alpha * real_data + ((1 - alpha) * fake_data)).requires_grad_(True)
    disc_interpolates = netD(interpolatesv)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolatesv,
                                    grad_outputs=torch.ones(disc_interpolates.size(), device=device),
                                    create_graph=True, retain_graph=True, only_inputs=True)
    gradients = gradients[0].view(real_data.size(0), -1)
    gradient_penalty = (((gradients + 1e-16).norm(2, dim=1) - constant) ** 2).mean() * lambda_gp
    return gradient_penalty, gradients


class GANLoss(nn.Module):
    def __init__(self, gan_mode):
        super().__init__()
        self.gan_mode = gan_mode

    def __call__(self, prediction, target_is_real):
        return -prediction.mean() if target_is_real else prediction.mean()


class Pix2PixModel:
    def __init__(self, gan_mode='wgangp'):
        self.netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(6, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4))
        self.criterionGAN = GANLoss(gan_mode)
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = self.criterionGAN(pred_fake, False)
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = self.criterionGAN(pred_real, True)
        self.loss_D = (self.loss_D_fake + self.loss_D_real) * 0.5
        self.loss_D_gp, _ = cal_gradient_penalty(self.netD, real_AB, fake_AB.detach(), 'cpu', lambda_gp=10.0)
        self.loss_D = self.loss_D + self.loss_D_gp
        self.loss_D.backward()


torch.manual_seed(0)
model = Pix2PixModel()
for it in range(30):
    model.set_input(torch.randn(4, 3, 8, 8), torch.randn(4, 3, 8, 8) * 0.5 + 0.5)
    model.forward()
    model.optimizer_D.zero_grad()
    model.backward_D()
    model.optimizer_D.step()
real_AB = torch.cat((model.real_A, model.real_B), 1)
fake_AB = torch.cat((model.real_A, model.fake_B.detach()), 1)
_, gradients = cal_gradient_penalty(model.netD, real_AB, fake_AB, 'cpu')
critic_grad_norm = gradients.norm(2, dim=1).mean().item()
