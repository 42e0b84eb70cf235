"""PreDiff VAE training after the fix (PR #33): each optimizer is zeroed right after its step, inside the branch.

source: https://github.com/gaozhihan/PreDiff/issues/32
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class VAEGANLoss(nn.Module):
    def __init__(self, disc):
        super().__init__()
        self.discriminator = disc

    def forward(self, inputs, reconstructions, kl, optimizer_idx):
        if optimizer_idx == 0:
            return F.l1_loss(reconstructions, inputs) + 1e-6 * kl
        return F.relu(1. - self.discriminator(inputs)).mean() + F.relu(1. + self.discriminator(reconstructions.detach())).mean()


class VAESEVIRLRPLModule(nn.Module):
    def __init__(self, accumulate_grad_batches=2):
        super().__init__()
        self.encoder, self.decoder = nn.Linear(16, 8), nn.Linear(4, 16)
        self.loss = VAEGANLoss(nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)))
        self.accumulate_grad_batches = accumulate_grad_batches
        self._optimizers = [torch.optim.Adam(list(self.encoder.parameters()) + list(self.decoder.parameters()), lr=1e-4),
                            torch.optim.Adam(self.loss.discriminator.parameters(), lr=1e-4)]

    def optimizers(self):
        return self._optimizers

    def manual_backward(self, loss):
        loss.backward()

    def training_step(self, batch, batch_idx):
        opt_ae, opt_disc = self.optimizers()
        mean, logvar = self.encoder(batch).chunk(2, dim=-1)
        kl = 0.5 * (mean.pow(2) + logvar.exp() - 1. - logvar).sum()
        reconstructions = self.decoder(mean + torch.randn_like(mean) * (0.5 * logvar).exp())
        aeloss = self.loss(batch, reconstructions, kl, optimizer_idx=0)
        self.manual_backward(aeloss)
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            opt_ae.step()
            opt_ae.zero_grad()
        discloss = self.loss(batch, reconstructions, kl, optimizer_idx=1)
        self.manual_backward(discloss)
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            opt_disc.step()
            opt_disc.zero_grad()


torch.manual_seed(0)
pl_module = VAESEVIRLRPLModule(accumulate_grad_batches=2)
for batch_idx, batch in enumerate([torch.randn(4, 16) for _ in range(4)]):
    pl_module.training_step(batch, batch_idx)
