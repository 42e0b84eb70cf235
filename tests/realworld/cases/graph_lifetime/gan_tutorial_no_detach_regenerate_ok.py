"""GAN tutorial without detach in the D step: the G step draws new fakes, so nothing is freed twice.

source: https://github.com/yunjey/pytorch-tutorial/issues/56
kind: lookalike
verified: both networks train for two iterations
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
latent_size, image_size = 8, 12
D = nn.Sequential(nn.Linear(image_size, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
G = nn.Sequential(nn.Linear(latent_size, 16), nn.ReLU(), nn.Linear(16, image_size), nn.Tanh())
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=2e-4)
g_optimizer = torch.optim.Adam(G.parameters(), lr=2e-4)


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


for i in range(2):
    images = torch.randn(4, image_size)
    real_labels, fake_labels = torch.ones(4, 1), torch.zeros(4, 1)
    d_loss_real = criterion(D(images), real_labels)
    z = torch.randn(4, latent_size)
    fake_images = G(z)
    d_loss_fake = criterion(D(fake_images), fake_labels)
    d_loss = d_loss_real + d_loss_fake
    reset_grad()
    d_loss.backward()
    d_optimizer.step()

    z = torch.randn(4, latent_size)
    fake_images = G(z)
    g_loss = criterion(D(fake_images), real_labels)
    reset_grad()
    g_loss.backward()
    g_optimizer.step()
print(d_loss.item(), g_loss.item())
