"""gpytorch's _symeig clamps the eigenvalues returned by eigh with the out-of-place clamp_min.

source: https://github.com/cornellius-gp/gpytorch/pull/1203
kind: lookalike
"""
import torch


def _symeig(evaluated_mat, eigenvectors=True):
    evals, evecs = torch.linalg.eigh(evaluated_mat)
    evals = evals.clamp_min(0.0)
    return evals, evecs


torch.manual_seed(0)
raw_lengthscale = torch.randn(1, requires_grad=True)
x = torch.randn(6, 2)
covar = torch.exp(-torch.cdist(x, x) ** 2 / (2 * raw_lengthscale.exp() ** 2)) + 1e-3 * torch.eye(6)
evals, evecs = _symeig(covar)
loss = evals.log().sum() + evecs.abs().sum()
loss.backward()
