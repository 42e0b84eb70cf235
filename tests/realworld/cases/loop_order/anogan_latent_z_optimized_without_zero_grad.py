"""AnoGAN-Pytorch searches the latent z of a test image with its own Adam optimizer (z_optimizer) but the loop never calls z_optimizer.zero_grad(): every loss.backward() adds to the z.grad of all previous iterations, so each step follows the running sum of old gradients instead of the current one.

source: https://github.com/GunhoChoi/AnoGAN-Pytorch/issues/1
kind: bug
symptom: silent
verified: after 300 iterations (Adam lr 1e-2) the anomaly score is 0.116 and z.grad has norm 0.864 (the sum of 300 iterations' gradients) against 0.0399 and a current-step gradient of norm 0.0099 with z_optimizer.zero_grad() at the top of each iteration; the two searches end with z 4.06 apart (max abs)
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
    gen_fake = generator(z)
    loss = Anomaly_score(image, gen_fake)
    loss.backward()  # ROOT
    z_optimizer.step()
print(i, round(loss.item(), 4), z.grad.norm().item())
