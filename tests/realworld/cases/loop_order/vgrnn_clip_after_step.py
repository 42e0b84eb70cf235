"""VGRNN training calls clip_grad_norm after opt.step(), so the update uses unclipped gradients.

source: https://github.com/VGraphRNN/VGRNN/issues/4
kind: bug
symptom: silent
verified: trained weights are identical to a run with the clip_grad_norm call removed
"""
import torch
import torch.nn as nn


class VGRNN(nn.Module):
    def __init__(self, x_dim=6, h_dim=8, z_dim=4):
        super().__init__()
        self.enc = nn.Linear(x_dim + h_dim, 2 * z_dim)
        self.dec = nn.Linear(z_dim, x_dim)
        self.rnn = nn.GRUCell(x_dim + z_dim, h_dim)
        self.h_dim = h_dim

    def forward(self, x_seq):
        h = torch.zeros(x_seq.size(1), self.h_dim)
        kld, nll = 0, 0
        for x in x_seq:
            mu, logvar = self.enc(torch.cat([x, h], -1)).chunk(2, -1)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            nll = nll + ((self.dec(z) - x) ** 2).mean()
            kld = kld - 0.5 * torch.mean(1 + logvar - mu ** 2 - logvar.exp())
            h = self.rnn(torch.cat([x, z], -1), h)
        return kld, nll


torch.manual_seed(0)
model = VGRNN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
clip = 0.01
x_seq = torch.randn(5, 4, 6) * 10
for k in range(10):
    optimizer.zero_grad()
    kld_loss, nll_loss = model(x_seq)
    loss = kld_loss + nll_loss
    loss.backward()
    optimizer.step()
    nn.utils.clip_grad_norm_(model.parameters(), clip)  # ROOT
