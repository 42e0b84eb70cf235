"""CTGAN backpropagates the gradient penalty with retain_graph=True because loss_d.backward() then runs through the same discriminator graph.

source: https://github.com/sdv-dev/CTGAN/issues/37
kind: lookalike
"""
import torch
import torch.nn as nn


def calc_gradient_penalty(discriminator, real_data, fake_data, lambda_=10):
    alpha = torch.rand(real_data.size(0), 1)
    interpolates = (alpha * real_data + (1 - alpha) * fake_data).requires_grad_(True)
    disc_interpolates = discriminator(interpolates)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones_like(disc_interpolates),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_


torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
discriminator = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optimizerD = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.9))
real = torch.randn(16, 16)
fake = generator(torch.randn(16, 8))
y_fake = discriminator(fake.detach())
y_real = discriminator(real)
pen = calc_gradient_penalty(discriminator, real, fake.detach())
loss_d = -(torch.mean(y_real) - torch.mean(y_fake))
optimizerD.zero_grad()
pen.backward(retain_graph=True)
loss_d.backward()
optimizerD.step()
