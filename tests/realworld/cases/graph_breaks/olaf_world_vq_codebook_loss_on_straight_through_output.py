"""Olaf-World VQLAM: the codebook loss is F.mse_loss(z_q, z_e.detach()) on the straight-through output z_q = x + (z - x).detach(), where the codebook lookup z only appears inside .detach(), so the codebook never receives a gradient.

source: https://github.com/showlab/Olaf-World/issues/8
kind: bug
symptom: silent
verified: vq.codebook.weight.grad is None after backward and the codebook stays at its initialization
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class VectorQuantizer(nn.Module):
    def __init__(self, num_latents, latent_dim):
        super().__init__()
        self.codebook = nn.Embedding(num_latents, latent_dim)
        self.codebook.weight.data.uniform_(-1.0 / num_latents, 1.0 / num_latents)

    def forward(self, x):
        distance = torch.cdist(x, self.codebook.weight)
        indices = torch.argmin(distance, dim=-1)
        z = self.codebook(indices)
        z_q = x + (z - x).detach()
        return z_q, z, x, indices


class VQLatentActionModel(nn.Module):
    def __init__(self, in_dim=16, latent_dim=8, num_latents=4, beta=0.25):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2 * in_dim, 32), nn.GELU(), nn.Linear(32, latent_dim))
        self.vq = VectorQuantizer(num_latents, latent_dim)
        self.decoder = nn.Sequential(nn.Linear(in_dim + latent_dim, 32), nn.GELU(), nn.Linear(32, in_dim))
        self.beta = beta

    def encode(self, frames):
        z_e = self.encoder(torch.cat([frames[:, 0], frames[:, 1]], dim=-1))
        z_q, _, _, indices = self.vq(z_e)
        return z_e, z_q, indices

    def forward(self, frames):
        z_e, z_q, indices = self.encode(frames)
        recon = self.decoder(torch.cat([frames[:, 0], z_q], dim=-1))
        recon_loss = F.mse_loss(recon, frames[:, 1])
        commit_loss = F.mse_loss(z_e, z_q.detach())
        codebook_loss = F.mse_loss(z_q, z_e.detach())  # ROOT
        return recon_loss + codebook_loss + self.beta * commit_loss


torch.manual_seed(0)
lam = VQLatentActionModel()
optimizer = torch.optim.AdamW(lam.parameters(), lr=1e-3)
codebook_init = lam.vq.codebook.weight.detach().clone()
for step in range(5):
    loss = lam(torch.randn(8, 2, 16))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
