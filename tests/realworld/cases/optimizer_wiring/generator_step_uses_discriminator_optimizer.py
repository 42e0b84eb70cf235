"""GAN lab: the generator update calls self.optimizer["discriminator"] instead of the generator's.

source: https://github.com/ufal/npfl138/issues/57
kind: bug
symptom: silent
verified: gan.generator.weight never changes
"""
import torch
import torch.nn as nn


class GAN(nn.Module):
    def __init__(self, z_dim=4, x_dim=8):
        super().__init__()
        self.z_dim = z_dim
        self.generator = nn.Linear(z_dim, x_dim)
        self.discriminator = nn.Linear(x_dim, 1)
        self.optimizer = {
            "generator": torch.optim.Adam(self.generator.parameters(), lr=1e-2),
            "discriminator": torch.optim.Adam(self.discriminator.parameters(), lr=1e-2),
        }
        self.loss = nn.BCEWithLogitsLoss()

    def train_step(self, images):
        z = torch.randn(images.shape[0], self.z_dim)
        generated = self.generator(z)
        g_loss = self.loss(self.discriminator(generated), torch.ones(images.shape[0], 1))
        self.optimizer["generator"].zero_grad()
        g_loss.backward()
        self.optimizer["discriminator"].step()  # ROOT

        d_loss = self.loss(self.discriminator(images), torch.ones(images.shape[0], 1)) + \
            self.loss(self.discriminator(generated.detach()), torch.zeros(images.shape[0], 1))
        self.optimizer["discriminator"].zero_grad()
        d_loss.backward()
        self.optimizer["discriminator"].step()
        return g_loss.item(), d_loss.item()


torch.manual_seed(0)
gan = GAN()
images = torch.randn(16, 8)
for _ in range(5):
    gan.train_step(images)
