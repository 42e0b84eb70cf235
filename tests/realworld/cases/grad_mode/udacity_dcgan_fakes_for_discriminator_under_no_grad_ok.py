"""Udacity DCGAN: the fake images for the discriminator step are generated under torch.no_grad(); the generator step generates new fakes with grad enabled and trains G through D.

source: https://github.com/udacity/deep-learning-v2-pytorch/pull/306
kind: lookalike
verified: G's weights get gradients and change in the generator step; D's step leaves G's gradients untouched
"""
import torch
import torch.nn as nn
import torch.optim as optim


def real_loss(D_out):
    return nn.functional.binary_cross_entropy_with_logits(D_out.squeeze(), torch.ones(D_out.size(0)))


def fake_loss(D_out):
    return nn.functional.binary_cross_entropy_with_logits(D_out.squeeze(), torch.zeros(D_out.size(0)))


torch.manual_seed(0)
z_size = 8
D = nn.Sequential(nn.Linear(16, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
G = nn.Sequential(nn.Linear(z_size, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh())
d_optimizer = optim.Adam(D.parameters(), 0.0002, [0.5, 0.999])
g_optimizer = optim.Adam(G.parameters(), 0.0002, [0.5, 0.999])
g_before = G[0].weight.clone()
for batch_i in range(3):
    real_images = torch.rand(4, 16) * 2 - 1
    d_optimizer.zero_grad()
    d_real_loss = real_loss(D(real_images))
    z = torch.rand(4, z_size) * 2 - 1
    with torch.no_grad():
        fake_images = G(z)
    d_fake_loss = fake_loss(D(fake_images))
    d_loss = d_real_loss + d_fake_loss
    d_loss.backward()
    d_optimizer.step()

    g_optimizer.zero_grad()
    z = torch.rand(4, z_size) * 2 - 1
    fake_images = G(z)
    g_loss = real_loss(D(fake_images))
    g_loss.backward()
    g_optimizer.step()
print(not torch.equal(g_before, G[0].weight))
