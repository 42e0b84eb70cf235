"""GPyTorch's LazyVariable.exact_predictive_mean after the fix of PR 228: it returns precomputed_cache.detach(), so the mean cache that ExactGP.__call__ keeps across posterior calls holds no graph and a test point can be optimized with one backward() per step.

source: https://github.com/cornellius-gp/gpytorch/pull/228
kind: lookalike
"""
import math

import torch
from torch import nn


class RBFKernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_lengthscale = nn.Parameter(torch.zeros(1))

    def forward(self, x1, x2):
        dist = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).pow(2).sum(-1)
        return torch.exp(-0.5 * dist / self.log_lengthscale.exp().pow(2))


class GaussianLikelihood(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_noise = nn.Parameter(torch.tensor([math.log(0.01)]))

    def forward(self, mean, covar):
        return mean, covar + self.log_noise.exp() * torch.eye(covar.size(-1))


def exact_predictive_mean(full_covar, full_mean, train_labels, n_train, likelihood, precomputed_cache=None):
    if precomputed_cache is None:
        train_mean, train_train_covar = likelihood(full_mean[:n_train], full_covar[:n_train, :n_train])
        train_labels_offset = (train_labels - train_mean).unsqueeze(-1)
        precomputed_cache = torch.linalg.solve(train_train_covar, train_labels_offset)
    test_mean = full_mean[n_train:]
    test_train_covar = full_covar[n_train:, :n_train]
    res = test_train_covar.matmul(precomputed_cache).squeeze(-1)
    res = res + test_mean
    return res, precomputed_cache.detach()


class ExactGP(nn.Module):
    def __init__(self, train_inputs, train_targets, likelihood):
        super().__init__()
        self.train_inputs = train_inputs
        self.train_targets = train_targets
        self.likelihood = likelihood
        self.covar_module = RBFKernel()
        self.mean_cache = None

    def __call__(self, inputs):  # posterior mode (model.eval())
        full_inputs = torch.cat([self.train_inputs, inputs], dim=-2)
        full_mean = torch.zeros(full_inputs.size(0))
        full_covar = self.covar_module(full_inputs, full_inputs)
        n_train = self.train_targets.size(-1)
        predictive_mean, mean_cache = exact_predictive_mean(
            full_covar=full_covar,
            full_mean=full_mean,
            train_labels=self.train_targets,
            n_train=n_train,
            likelihood=self.likelihood,
            precomputed_cache=self.mean_cache,
        )
        self.mean_cache = mean_cache
        return predictive_mean


torch.manual_seed(0)
train_x = torch.linspace(0, 1, 11).unsqueeze(-1)
train_y = torch.sin(train_x.squeeze(-1) * (2 * math.pi))
model = ExactGP(train_x, train_y, GaussianLikelihood())
model.eval()

x = torch.tensor([[0.25]], requires_grad=True)
optimizer = torch.optim.Adam([x], lr=0.1)
for i in range(5):
    optimizer.zero_grad()
    loss = -model(x).sum()  # stands for -batch_expected_improvement(x, model, 0)
    print("Iter {}, loss = {}".format(i, loss.item()))
    loss.backward()
    optimizer.step()
