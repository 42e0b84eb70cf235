"""EVE's `joint_linear_vae.py` after its fix: the loop alternating supervised regressor steps (MSE on labelled sequences every `lm_training_frequency` steps) and unsupervised ELBO steps calls `optimizer.zero_grad()` at the top of every step, before the branch, so a supervised step updates only what the MSE reaches and the decoder stays put on those steps.

source: https://github.com/OATML-Markslab/EVE/commit/ba75f743292566f9f2d23a747f6bdf1eaaf3268d
kind: lookalike
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
np.random.seed(0)

SEQ_LEN, ALPHABET, LATENT = 12, 5, 4


class VAE(nn.Module):
    """Stands in for EVE's MSA VAE: one-hot sequences, Gaussian latent, Bernoulli-logit decoder."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(SEQ_LEN * ALPHABET, 32), nn.ReLU(), nn.Linear(32, 2 * LATENT))
        self.decoder = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, SEQ_LEN * ALPHABET))

    def loss_function(self, recon_x_log, x, mu, log_var):
        bce = F.binary_cross_entropy_with_logits(recon_x_log, x.flatten(1), reduction="sum") / len(x)
        kld = -0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp()) / len(x)
        return bce + kld, bce


class VAEWithLinearRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.vae_model = VAE()
        self.lm = nn.Linear(LATENT, 1)

    def forward(self, x):
        mu, log_var = self.vae_model.encoder(x.flatten(1)).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * (0.5 * log_var).exp()
        return mu, log_var, z, self.lm(mu)


x_train = F.one_hot(torch.randint(0, ALPHABET, (200, SEQ_LEN)), ALPHABET).float()
y_train = x_train[:, :, 0].sum(1, keepdim=True) / SEQ_LEN
labelled = torch.arange(40)
weights_train = np.random.rand(200)
seq_sample_probs = weights_train / weights_train.sum()
batch_order = np.arange(200)

vae_aux = VAEWithLinearRegressor()
optimizer = torch.optim.Adam(vae_aux.parameters(), lr=1e-3)
vae_aux.train()
num_training_steps, lm_training_frequency, batch_size = 50, 5, 32
moved = 0
for training_step in range(1, num_training_steps + 1):
    optimizer.zero_grad()
    decoder_before = [p.detach().clone() for p in vae_aux.vae_model.decoder.parameters()]
    if training_step % lm_training_frequency == 0:
        x, y = x_train[labelled], y_train[labelled]
        mu, log_var, z, lm_pred = vae_aux(x)
        mse = nn.MSELoss()(lm_pred, y)
        loss = 10 * mse
    else:
        batch_sample_index = np.random.choice(batch_order, batch_size, p=seq_sample_probs).tolist()
        x = x_train[batch_sample_index]
        mu, log_var, z, lm_pred = vae_aux(x)
        recon_x_log = vae_aux.vae_model.decoder(z)
        neg_elbo, bce = vae_aux.vae_model.loss_function(recon_x_log, x, mu, log_var)
        loss = neg_elbo
    loss.backward()
    optimizer.step()
    if training_step % lm_training_frequency == 0:
        moved += any(not torch.equal(b, p) for b, p in zip(decoder_before, vae_aux.vae_model.decoder.parameters()))

print(f"decoder moved on supervised steps: {moved}/{num_training_steps // lm_training_frequency}")
