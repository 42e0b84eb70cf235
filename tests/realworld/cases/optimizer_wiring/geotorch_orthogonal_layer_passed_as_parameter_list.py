"""geotorch orthogonal Procrustes: the optimizer is built with Adam([R]), a list holding the parametrized Linear module itself instead of its parameters.

source: https://github.com/lezcano/geotorch/issues/7
kind: bug
symptom: crash
verified: optimizer can only optimize Tensors, but one of the params is torch.nn.utils.parametrize.ParametrizedLinear
"""
import torch
import torch.nn as nn
from torch.nn.utils import parametrize


class Skew(nn.Module):
    def forward(self, X):
        A = X.triu(1)
        return A - A.transpose(-1, -2)


class MatrixExp(nn.Module):
    def forward(self, X):
        return torch.linalg.matrix_exp(X)


def orthogonal(module, tensor_name="weight"):
    parametrize.register_parametrization(module, tensor_name, Skew())
    parametrize.register_parametrization(module, tensor_name, MatrixExp())
    return module


torch.manual_seed(0)
X = torch.randn(32, 4)
Q, _ = torch.linalg.qr(torch.randn(4, 4))
Y = X @ Q
R = nn.Linear(X.shape[1], X.shape[1], bias=False)
orthogonal(R, "weight")
optim = torch.optim.Adam([R], lr=1e-1)  # ROOT
for i in range(20):
    optim.zero_grad()
    loss = ((R(X) - Y) ** 2).sum()
    loss.backward()
    optim.step()
