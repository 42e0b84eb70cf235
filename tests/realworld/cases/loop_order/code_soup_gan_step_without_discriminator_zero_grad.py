"""code-soup GAN.step: the discriminator optimizer steps every iteration but self.discriminator.zero_grad() is never called, so D's .grad keeps the sum of every previous iteration's D losses plus the gradient that the generator loss sent through D.

source: https://github.com/Adversarial-Deep-Learning/code-soup/issues/69
kind: bug
symptom: silent
verified: D's first-layer .grad has norm 0.67, 1.32, 1.96, 2.60 after steps 1-4 (every step's errD and errG gradients summed, and D's optimizer steps on that sum); with discriminator.zero_grad() before errD.backward() it stays 0.64-0.67
"""
import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, nz=8):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(nz, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, x):
        return self.main(x)


class GAN:
    def __init__(self, nz=8, lr=2e-4):
        self.nz = nz
        self.generator = Generator(nz)
        self.discriminator = Discriminator()
        self.criterion = nn.BCELoss()
        self.optimizerD = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        self.optimizerG = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999))

    def step(self, real):
        b = real.shape[0]
        label_real, label_fake = torch.ones(b, 1), torch.zeros(b, 1)
        noise = torch.randn(b, self.nz)
        fake = self.generator(noise)
        errD_real = self.criterion(self.discriminator(real), label_real)
        errD_fake = self.criterion(self.discriminator(fake.detach()), label_fake)
        errD = errD_real + errD_fake
        errD.backward()  # ROOT
        self.optimizerD.step()

        self.generator.zero_grad()
        errG = self.criterion(self.discriminator(fake), label_real)
        errG.backward()
        self.optimizerG.step()
        return errD.item(), errG.item()


torch.manual_seed(0)
gan = GAN()
for i in range(4):
    real = torch.randn(16, 16) * 0.5 + 1.0
    gan.step(real)
    print(i, gan.discriminator.main[0].weight.grad.norm().item())
