"""GAN tutorial keeps fake_images attached in the D step but resets all grads before the G step.

source: https://github.com/yunjey/pytorch-tutorial/issues/56
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
latent_size, image_size, batch_size = 4, 8, 6
D = nn.Sequential(nn.Linear(image_size, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
G = nn.Sequential(nn.Linear(latent_size, 16), nn.ReLU(), nn.Linear(16, image_size), nn.Tanh())
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=2e-4)
g_optimizer = torch.optim.Adam(G.parameters(), lr=2e-4)


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


data_loader = [torch.rand(batch_size, image_size) * 2 - 1 for _ in range(3)]
for i, images in enumerate(data_loader):
    real_labels = torch.ones(batch_size, 1)
    fake_labels = torch.zeros(batch_size, 1)
    d_loss_real = criterion(D(images), real_labels)
    z = torch.randn(batch_size, latent_size)
    fake_images = G(z)
    d_loss_fake = criterion(D(fake_images), fake_labels)
    d_loss = d_loss_real + d_loss_fake
    reset_grad()
    d_loss.backward()
    d_optimizer.step()

    z = torch.randn(batch_size, latent_size)
    fake_images = G(z)
    g_loss = criterion(D(fake_images), real_labels)
    reset_grad()
    g_loss.backward()
    g_optimizer.step()
