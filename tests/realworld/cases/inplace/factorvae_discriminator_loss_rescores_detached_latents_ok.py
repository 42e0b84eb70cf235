"""FactorVAE's solver with the discriminator's score on the VAE latents recomputed from z.detach() after the VAE step: D_tc_loss no longer reaches back into the encoder that optim_VAE.step() updated, and the discriminator still learns from both terms (the reporter's D_z.detach() variant also runs, but drops the first term's gradient to D).

source: https://github.com/1Konny/FactorVAE/issues/15
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def recon_loss(x, x_recon):
    return F.binary_cross_entropy_with_logits(x_recon, x, reduction='sum').div(x.size(0))


def kl_divergence(mu, logvar):
    return 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1).sum(1).mean()


def permute_dims(z):
    B, _ = z.size()
    perm_z = []
    for z_j in z.split(1, 1):
        perm = torch.randperm(B).to(z.device)
        perm_z.append(z_j[perm])
    return torch.cat(perm_z, 1)


class FactorVAE1(nn.Module):
    def __init__(self, z_dim=6, x_dim=64):
        super().__init__()
        self.z_dim = z_dim
        self.encode = nn.Sequential(nn.Linear(x_dim, 128), nn.ReLU(), nn.Linear(128, 2 * z_dim))
        self.decode = nn.Sequential(nn.Linear(z_dim, 128), nn.ReLU(), nn.Linear(128, x_dim))

    def reparametrize(self, mu, logvar):
        std = logvar.mul(0.5).exp_()
        eps = std.data.new(std.size()).normal_()
        return eps.mul(std).add_(mu)

    def forward(self, x, no_dec=False):
        stats = self.encode(x)
        mu = stats[:, :self.z_dim]
        logvar = stats[:, self.z_dim:]
        z = self.reparametrize(mu, logvar)
        if no_dec:
            return z.squeeze()
        x_recon = self.decode(z)
        return x_recon, mu, logvar, z.squeeze()


class Discriminator(nn.Module):
    def __init__(self, z_dim=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 64), nn.LeakyReLU(0.2, True), nn.Linear(64, 2))

    def forward(self, z):
        return self.net(z).squeeze()


class Solver(object):
    def __init__(self, gamma=6.4, lr_VAE=1e-4, lr_D=1e-4):
        self.gamma = gamma
        self.VAE = FactorVAE1()
        self.D = Discriminator()
        self.optim_VAE = optim.Adam(self.VAE.parameters(), lr=lr_VAE, betas=(0.9, 0.999))
        self.optim_D = optim.Adam(self.D.parameters(), lr=lr_D, betas=(0.5, 0.9))

    def train(self, batches):
        ones = torch.ones(32, dtype=torch.long)
        zeros = torch.zeros(32, dtype=torch.long)
        for x_true1, x_true2 in batches:
            x_recon, mu, logvar, z = self.VAE(x_true1)
            vae_recon_loss = recon_loss(x_true1, x_recon)
            vae_kld = kl_divergence(mu, logvar)

            D_z = self.D(z)
            vae_tc_loss = (D_z[:, :1] - D_z[:, 1:]).mean()

            vae_loss = vae_recon_loss + vae_kld + self.gamma * vae_tc_loss

            self.optim_VAE.zero_grad()
            vae_loss.backward(retain_graph=True)
            self.optim_VAE.step()

            z_prime = self.VAE(x_true2, no_dec=True)
            z_pperm = permute_dims(z_prime).detach()
            D_z_pperm = self.D(z_pperm)
            D_z_detached = self.D(z.detach())
            D_tc_loss = 0.5 * (F.cross_entropy(D_z_detached, zeros) + F.cross_entropy(D_z_pperm, ones))

            self.optim_D.zero_grad()
            D_tc_loss.backward()
            self.optim_D.step()
        return vae_loss.item(), D_tc_loss.item()


torch.manual_seed(0)
batches = [((torch.rand(32, 64) > 0.5).float(), (torch.rand(32, 64) > 0.5).float()) for _ in range(4)]
print(Solver().train(batches))
