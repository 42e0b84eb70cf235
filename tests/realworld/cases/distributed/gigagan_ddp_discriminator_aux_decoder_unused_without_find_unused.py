"""GigaGAN's trainer wraps the discriminator in DDP through accelerate with `DistributedDataParallelKwargs(find_unused_parameters=find_unused_parameters)`, whose constructor default was `False`; the discriminator only runs its auxiliary reconstruction decoder when `calc_aux_loss=True` (the real-image pass of the discriminator step), so the generator step's backward leaves the decoder's parameters without gradients, DDP's reduction never finishes, and the next discriminator forward fails.

source: https://github.com/lucidrains/gigagan-pytorch/commit/4e805699d9b09fe828d8b1d5abed407c1d75a44e
kind: bug
symptom: crash
verified: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self, latent=16):
        super().__init__()
        self.latent = latent
        self.net = nn.Sequential(nn.Linear(latent, 64), nn.LeakyReLU(0.2), nn.Linear(64, 3 * 8 * 8), nn.Tanh())

    def forward(self, noise):
        return self.net(noise).view(-1, 3, 8, 8)


class Discriminator(nn.Module):
    """Conv trunk, a realness head, and an auxiliary decoder that reconstructs the input from the features."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 3, 2, 1))
        self.to_logits = nn.Linear(32 * 2 * 2, 1)
        self.aux_recon_decoder = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, 4), nn.LeakyReLU(0.2), nn.Conv2d(16, 3, 1))

    def forward(self, images, calc_aux_loss=True):
        fmap = self.trunk(images)
        logits = self.to_logits(fmap.flatten(1))
        aux_loss = None
        if calc_aux_loss:
            aux_loss = F.mse_loss(self.aux_recon_decoder(fmap), images)
        return logits, aux_loss


class GigaGANTrainer:
    def __init__(self, generator, discriminator, lr=2e-4, find_unused_parameters=False):  # ROOT
        self.G = DistributedDataParallel(generator)
        self.D = DistributedDataParallel(discriminator, find_unused_parameters=find_unused_parameters)
        self.G_opt = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.9))
        self.D_opt = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.9))

    def train_discriminator_step(self, real):
        noise = torch.randn(len(real), self.G.module.latent)
        with torch.no_grad():
            fake = self.G(noise)
        fake_logits, _ = self.D(fake, calc_aux_loss=False)
        real_logits, aux_loss = self.D(real, calc_aux_loss=True)
        loss = F.relu(1 + fake_logits).mean() + F.relu(1 - real_logits).mean() + aux_loss
        self.D_opt.zero_grad()
        loss.backward()
        self.D_opt.step()
        return loss.item()

    def train_generator_step(self, batch_size):
        fake = self.G(torch.randn(batch_size, self.G.module.latent))
        logits, _ = self.D(fake, calc_aux_loss=False)
        loss = -logits.mean()
        self.G_opt.zero_grad()
        loss.backward()
        self.G_opt.step()
        return loss.item()


with tempfile.TemporaryDirectory() as tmp:
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rendezvous"), rank=0, world_size=1)
    try:
        trainer = GigaGANTrainer(Generator(), Discriminator())
        images = torch.rand(64, 3, 8, 8) * 2 - 1
        for step in range(4):
            real = images[torch.randint(0, 64, (16,))]
            d_loss = trainer.train_discriminator_step(real)
            g_loss = trainer.train_generator_step(16)
            print(f"step {step} d_loss {d_loss:.4f} g_loss {g_loss:.4f}")
    finally:
        dist.destroy_process_group()
