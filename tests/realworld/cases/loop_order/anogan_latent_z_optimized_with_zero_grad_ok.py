"""The same AnoGAN latent search with z_optimizer.zero_grad() at the top of each iteration: every Adam step uses the current anomaly-score gradient of z.

source: https://github.com/GunhoChoi/AnoGAN-Pytorch/issues/1
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.init as init


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(100, 128), nn.ReLU(), nn.Linear(128, 196), nn.Tanh())

    def forward(self, z):
        return self.fc(z).view(-1, 1, 14, 14)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature = nn.Sequential(nn.Flatten(), nn.Linear(196, 64), nn.LeakyReLU(0.2))
        self.fc = nn.Sequential(nn.Linear(64, 1), nn.Sigmoid())

    def forward(self, x):
        feature = self.feature(x)
        return self.fc(feature), feature


def Anomaly_score(x, G_z, Lambda=0.1):
    _, x_feature = discriminator(x)
    _, G_z_feature = discriminator(G_z)
    residual_loss = torch.sum(torch.abs(x - G_z))
    discrimination_loss = torch.sum(torch.abs(x_feature - G_z_feature))
    return ((1 - Lambda) * residual_loss + Lambda * discrimination_loss) / x.numel()


torch.manual_seed(0)
generator, discriminator = Generator(), Discriminator()
for p in list(generator.parameters()) + list(discriminator.parameters()):
    p.requires_grad_(False)
with torch.no_grad():
    image = generator(torch.randn(1, 100)) + 0.05 * torch.randn(1, 1, 14, 14)

z = init.normal_(torch.zeros(1, 100), mean=0, std=0.1).requires_grad_(True)
z_optimizer = torch.optim.Adam([z], lr=1e-2)
for i in range(300):
    z_optimizer.zero_grad()
    gen_fake = generator(z)
    loss = Anomaly_score(image, gen_fake)
    loss.backward()
    z_optimizer.step()
print(i, round(loss.item(), 4), z.grad.norm().item())
