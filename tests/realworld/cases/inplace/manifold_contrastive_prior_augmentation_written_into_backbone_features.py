"""manifold-contrastive's training loop learns transport operators `psi` between the backbone features of two views and, with `learn_prior`, augments the first view's features by writing the transported features back into them: `z0[:, filter_idx] = (T @ z0[:, filter_idx].clone() ...)`. `z0` is a reshaped view of the backbone's last ReLU output, which autograd saved for the ReLU's backward; the indexed assignment bumps its version, so `loss.backward()` of the summed transport, KL and contrastive losses fails.

source: https://github.com/kfallah/manifold-contrastive/commit/73765960f6b8f457b682aeefa65b782c64aae076
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class VIEncoder(nn.Module):
    """Infers transport coefficients c between feature pairs (reparameterised Gaussian), with a learned prior."""

    def __init__(self, feat_dim=16, num_ops=4, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * feat_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * num_ops))
        self.prior = nn.Sequential(nn.Linear(feat_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * num_ops))

    def forward(self, z0, z1, psi):
        mu, log_scale = self.net(torch.cat([z0, z1], dim=-1)).chunk(2, dim=-1)
        prior_mu, prior_log_scale = self.prior(z0).chunk(2, dim=-1)
        c = mu + torch.randn_like(mu) * log_scale.exp()
        kl = (prior_log_scale - log_scale + (log_scale.exp() ** 2 + (mu - prior_mu) ** 2)
              / (2 * prior_log_scale.exp() ** 2) - 0.5).sum(-1).mean()
        return c, kl, (log_scale, mu)

    def sample(self, z0):
        prior_mu, prior_log_scale = self.prior(z0).chunk(2, dim=-1)
        return prior_mu + torch.randn_like(prior_mu) * prior_log_scale.exp()


def contrastive_loss(h0, h1, temperature):
    h = F.normalize(torch.cat([h0, h1]), dim=-1)
    sim = h @ h.t() / temperature
    sim.fill_diagonal_(float("-inf"))
    n = len(h0)
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


backbone = nn.Sequential(
    nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(),
)
projector = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
encoder = VIEncoder()
psi = nn.Parameter(torch.randn(4, 16, 16) * 0.01)
opt = torch.optim.SGD([
    {"params": encoder.parameters(), "lr": 1e-3},
    {"params": list(backbone.parameters()) + list(projector.parameters()), "lr": 3e-3},
    {"params": [psi], "lr": 1e-3},
], lr=1e-3, momentum=0.9, nesterov=True)

learn_prior, random_filter_count, transop_batch, kl_weight = True, 8, 16, 0.01
for curr_iter in range(3):
    x0 = torch.randn(32, 3, 16, 16)
    x1 = x0 + 0.1 * torch.randn_like(x0)

    # TRANSOP LOSS
    z0, z1 = backbone[:-2](x0).reshape(len(x0), -1, 16), backbone[:-2](x1).reshape(len(x1), -1, 16)
    filter_idx = torch.randperm(z0.shape[1])[:random_filter_count]
    z0_use, z1_use = z0[:transop_batch, filter_idx], z1[:transop_batch, filter_idx]
    c, kl_loss, (log_scale, shift) = encoder(z0_use.detach(), z1_use.detach(), psi.detach())
    T = torch.matrix_exp(torch.einsum("bsm,mpk->bspk", c, psi))
    z1_hat = (T @ z0_use.unsqueeze(-1)).squeeze(-1)
    loss = F.mse_loss(z1_hat, z1_use) + kl_weight * kl_loss

    if learn_prior:
        c_aug = encoder.sample(z0[:, filter_idx].detach())
        T = torch.matrix_exp(torch.einsum("bsm,mpk->bspk", c_aug, psi))
        z0[:, filter_idx] = (T @ z0[:, filter_idx].clone().unsqueeze(-1)).squeeze(-1)  # ROOT

    # CONTRASTIVE LOSS
    z0f = backbone[-2:](z0.reshape(len(z0), -1, 4, 4))
    z1f = backbone[-2:](z1.reshape(len(z1), -1, 4, 4))
    h = projector(torch.cat([z0f, z1f]))
    h0, h1 = h[:len(z0)], h[len(z0):]
    loss = loss + contrastive_loss(h0, h1, 0.5)

    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(psi, 0.1)
    opt.step()
    print(f"iter {curr_iter}: loss {loss.item():.3f}")
