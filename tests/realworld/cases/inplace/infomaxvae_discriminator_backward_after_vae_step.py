"""InfoMaxVAE trains the VAE and the mutual-information discriminator from one forward: optim_VAE.step() runs between vae_loss.backward(retain_graph=True) and info_loss.backward(), and info_loss's backward goes through z into the encoder, whose weights the step has just changed in place, so training fails at the second backward.

source: https://github.com/AliLotfi92/InfoMaxVAE/issues/1
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Discriminator(nn.Module):
    def __init__(self, z_dim=2):
        super(Discriminator, self).__init__()
        self.z_dim = z_dim
        self.net = nn.Sequential(nn.Linear(784 + z_dim, 100), nn.ReLU(True), nn.Linear(100, 1))

    def forward(self, x, z):
        x = x.view(-1, 784)
        x = torch.cat((x, z), 1)
        return self.net(x).squeeze()


class VAE1(nn.Module):  # the encoder's and decoder's hidden layers reduced to one of 64 units each
    def __init__(self, z_dim=2):
        super(VAE1, self).__init__()
        self.z_dim = z_dim
        self.encode = nn.Sequential(nn.Linear(784, 64), nn.ReLU(True), nn.Linear(64, 2 * z_dim))
        self.decode = nn.Sequential(nn.Linear(z_dim, 64), nn.ReLU(True), nn.Linear(64, 784), nn.Sigmoid())

    def reparametrize(self, mu, logvar):
        std = logvar.mul(0.5).exp_()
        eps = std.data.new(std.size()).normal_()
        return eps.mul(std).add_(mu)

    def forward(self, x):
        stats = self.encode(x.view(-1, 784))
        mu = stats[:, :self.z_dim]
        logvar = stats[:, self.z_dim:]
        z = self.reparametrize(mu, logvar)
        x_recon = self.decode(z).view(x.size())
        return x_recon, mu, logvar, z.squeeze()


def recon_loss(x_recon, x):
    return F.binary_cross_entropy(x_recon, x, reduction='sum').div(x.size(0))


def kl_divergence(mu, logvar):
    return -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(1).mean()


def permute_dims(z):
    B, _ = z.size()
    return z[torch.randperm(B)]


torch.manual_seed(0)
gamma = 10
VAE, D = VAE1(), Discriminator()
optim_VAE = optim.Adam(VAE.parameters(), lr=0.0001, betas=(0.9, 0.999))
optim_D = optim.Adam(D.parameters(), lr=0.00001, betas=(0.9, 0.999))
for batch_idx in range(3):
    x_true = torch.rand(16, 1, 28, 28)  # stands for an MNIST batch
    x_recon, mu, logvar, z = VAE(x_true)
    D_xz = D(x_true, z)
    D_x_z = D(x_true, permute_dims(z))
    Info_xz = -(D_xz.mean() - (torch.exp(D_x_z - 1).mean()))
    vae_loss = recon_loss(x_recon, x_true) + kl_divergence(mu, logvar) + gamma * Info_xz

    optim_VAE.zero_grad()
    vae_loss.backward(retain_graph=True)
    optim_VAE.step()

    info_loss = Info_xz
    optim_D.zero_grad()
    info_loss.backward()  # ROOT
    optim_D.step()
    print(batch_idx, "vae loss", round(vae_loss.item(), 3), "info", round(-info_loss.item(), 3))
