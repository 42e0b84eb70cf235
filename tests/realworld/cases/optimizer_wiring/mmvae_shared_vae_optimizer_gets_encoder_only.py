"""MMVAE: the shared VAE's optimizer is only given the shared encoder's parameters; the shared decoder never trains.

source: https://github.com/zdebruine/MMVAE/issues/39
kind: bug
symptom: silent
verified: model.shared_vae.decoder weights never change (they get gradients no optimizer applies)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SharedVAE(nn.Module):
    def __init__(self, d_in=16, d_z=4):
        super().__init__()
        self.encoder = nn.Linear(d_in, 2 * d_z)
        self.decoder = nn.Linear(d_z, d_in)

    def forward(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        return self.decoder(z), kl


class Expert(nn.Module):
    def __init__(self, n_genes, d_hidden=16):
        super().__init__()
        self.encoder = nn.Linear(n_genes, d_hidden)
        self.decoder = nn.Linear(d_hidden, n_genes)


class MMVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleDict({"human": Expert(20), "mouse": Expert(24)})
        self.shared_vae = SharedVAE()

    def configure_optimizers(self):
        optimizers = {name: torch.optim.Adam(expert.parameters(), lr=1e-3) for name, expert in self.experts.items()}
        optimizers["shared"] = torch.optim.Adam(self.shared_vae.encoder.parameters(), lr=1e-3)  # ROOT
        return optimizers

    def training_step(self, x, expert_id, optimizers):
        for opt in optimizers.values():
            opt.zero_grad()
        expert = self.experts[expert_id]
        recon, kl = self.shared_vae(torch.relu(expert.encoder(x)))
        loss = F.mse_loss(expert.decoder(torch.relu(recon)), x) + 0.1 * kl
        loss.backward()
        optimizers[expert_id].step()
        optimizers["shared"].step()
        return loss


torch.manual_seed(0)
model = MMVAE()
optimizers = model.configure_optimizers()
for step in range(4):
    expert_id = "human" if step % 2 == 0 else "mouse"
    x = torch.rand(8, 20 if expert_id == "human" else 24)
    model.training_step(x, expert_id, optimizers)
