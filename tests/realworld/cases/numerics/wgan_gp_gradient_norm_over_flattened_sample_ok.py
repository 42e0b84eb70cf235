"""WGAN-GP penalty flattens each sample's input gradient before taking its 2-norm.

source: https://github.com/Zeleni9/pytorch-wgan/issues/40
kind: lookalike
"""
import torch
import torch.nn as nn
from torch import autograd


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 16, 4, 2, 1),
                                  nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(16 * 8 * 8, 1))

    def forward(self, x):
        return self.main(x)


class WGAN_GP:
    def __init__(self):
        self.D = Discriminator()
        self.lambda_term = 10
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), lr=1e-4, betas=(0.5, 0.999))

    def calculate_gradient_penalty(self, real_images, fake_images):
        eta = torch.rand(real_images.size(0), 1, 1, 1).expand_as(real_images)
        interpolated = (eta * real_images + (1 - eta) * fake_images).requires_grad_(True)
        prob_interpolated = self.D(interpolated)
        gradients = autograd.grad(outputs=prob_interpolated, inputs=interpolated,
                                  grad_outputs=torch.ones_like(prob_interpolated),
                                  create_graph=True, retain_graph=True)[0]
        gradients = gradients.view(gradients.size(0), -1)
        grad_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * self.lambda_term
        return grad_penalty


torch.manual_seed(0)
gan = WGAN_GP()
for it in range(3):
    images, fake_images = torch.randn(8, 1, 32, 32), torch.randn(8, 1, 32, 32)
    d_loss_real = gan.D(images).mean()
    d_loss_fake = gan.D(fake_images).mean()
    gradient_penalty = gan.calculate_gradient_penalty(images, fake_images)
    d_loss = d_loss_fake - d_loss_real + gradient_penalty
    gan.d_optimizer.zero_grad()
    d_loss.backward()
    gan.d_optimizer.step()
    print(it, gradient_penalty.item())
