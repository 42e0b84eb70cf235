"""DDGM with the fix from the thread: p_dnns wrapped in nn.ModuleList, so the reverse-diffusion networks are registered and trained with the decoder.

source: https://github.com/jmtomczak/intro_dgm/issues/6
kind: lookalike
verified: model.parameters() yields all 14 tensors; the p_dnns weights move during training
"""
import math

import torch
import torch.nn as nn


class DDGM(nn.Module):
    def __init__(self, p_dnns, decoder_net, beta, T, D):
        super().__init__()
        self.p_dnns = nn.ModuleList(p_dnns)
        self.decoder_net = decoder_net
        self.D = D
        self.T = T
        self.beta = torch.FloatTensor([beta])

    @staticmethod
    def reparameterization_gaussian_diffusion(x, i, beta):
        return torch.sqrt(1. - beta) * x + torch.sqrt(beta) * torch.randn_like(x)

    @staticmethod
    def log_normal_diag(x, mu, log_var):
        return -0.5 * (math.log(2. * math.pi) + log_var + torch.exp(-log_var) * (x - mu) ** 2.)

    def forward(self, x):
        zs = [self.reparameterization_gaussian_diffusion(x, 0, self.beta)]
        for i in range(1, self.T):
            zs.append(self.reparameterization_gaussian_diffusion(zs[-1], i, self.beta))
        mus, log_vars = [], []
        for i in range(len(self.p_dnns) - 1, -1, -1):
            h = self.p_dnns[i](zs[i + 1])
            mu_i, log_var_i = torch.chunk(h, 2, dim=1)
            mus.append(mu_i)
            log_vars.append(log_var_i)
        mu_x = self.decoder_net(zs[0])
        re = ((x - mu_x) ** 2).sum(-1)
        kl = 0.
        for i, (mu_i, log_var_i) in enumerate(zip(mus, log_vars)):
            z_i = zs[len(self.p_dnns) - 1 - i]
            kl = kl + (self.log_normal_diag(z_i, torch.sqrt(1. - self.beta) * z_i, torch.log(self.beta))
                       - self.log_normal_diag(z_i, mu_i, log_var_i)).sum(-1)
        return (re + kl).mean()


torch.manual_seed(0)
D, M, T = 8, 16, 4
p_dnns = [nn.Sequential(nn.Linear(D, M), nn.LeakyReLU(), nn.Linear(M, 2 * D)) for _ in range(T - 1)]
decoder_net = nn.Linear(D, D)
model = DDGM(p_dnns, decoder_net, beta=0.9, T=T, D=D)
optimizer = torch.optim.Adamax([p for p in model.parameters() if p.requires_grad], lr=1e-3)
x = torch.randn(64, D)
for step in range(20):
    loss = model(x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
