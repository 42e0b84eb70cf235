"""Fixing the lengthscale by leaving its raw parameter out of the optimizer by name: the covariance group is built from named_parameters() without 'base_kernel.raw_lengthscale', so the optimizer never updates it while outputscale and noise are optimised (the lengthscale still gets a gradient, which nothing applies).

source: https://github.com/cornellius-gp/gpytorch/issues/1131
kind: lookalike
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RBFKernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_lengthscale = nn.Parameter(torch.zeros(1, 1))

    @property
    def lengthscale(self):
        return F.softplus(self.raw_lengthscale)

    def forward(self, x1, x2):
        return torch.exp(-0.5 * torch.cdist(x1 / self.lengthscale, x2 / self.lengthscale).pow(2))


class ScaleKernel(nn.Module):
    def __init__(self, base_kernel):
        super().__init__()
        self.base_kernel = base_kernel
        self.raw_outputscale = nn.Parameter(torch.zeros(()))

    @property
    def outputscale(self):
        return F.softplus(self.raw_outputscale)

    def forward(self, x1, x2):
        return self.outputscale * self.base_kernel(x1, x2)


class GaussianLikelihood(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_noise = nn.Parameter(torch.zeros(()))

    @property
    def noise(self):
        return F.softplus(self.raw_noise) + 1e-4


class ExactGPModel(nn.Module):
    def __init__(self, train_x, train_y, likelihood):
        super().__init__()
        self.train_x, self.train_y, self.likelihood = train_x, train_y, likelihood
        self.mean_constant = nn.Parameter(torch.zeros(()))
        self.covar_module = ScaleKernel(RBFKernel())

    def neg_mll(self):
        K = self.covar_module(self.train_x, self.train_x) + self.likelihood.noise * torch.eye(len(self.train_x))
        L = torch.linalg.cholesky(K)
        r = (self.train_y - self.mean_constant).unsqueeze(-1)
        alpha = torch.cholesky_solve(r, L)
        n = len(self.train_x)
        return (0.5 * (r * alpha).sum() + torch.log(torch.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi)) / n


torch.manual_seed(0)
train_x = torch.linspace(0, 1, 40).unsqueeze(-1)
train_y = torch.sin(train_x.squeeze(-1) * 2 * math.pi) + 0.1 * torch.randn(40)
likelihood = GaussianLikelihood()
model = ExactGPModel(train_x, train_y, likelihood)

optimizer = torch.optim.Adam([
    {'params': model.likelihood.parameters()},
    {'params': [p for n, p in model.covar_module.named_parameters() if n != 'base_kernel.raw_lengthscale']},
], lr=0.1)
print("covariance parameters in the optimizer", len(optimizer.param_groups[1]['params']))
for i in range(50):
    optimizer.zero_grad()
    loss = model.neg_mll()
    loss.backward()
    optimizer.step()
print("lengthscale", model.covar_module.base_kernel.lengthscale.item(), "outputscale", model.covar_module.outputscale.item())
