"""MiniGP's kernel computes exp(log_length_scale) once in __init__; every iteration backprops through that one graph.

source: https://github.com/IceLab-X/MiniGP/issues/13
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn


class ARDKernel(nn.Module):
    def __init__(self, input_dim, initial_length_scale=1.0, initial_signal_variance=1.0):
        super().__init__()
        self.log_length_scale = nn.Parameter(torch.ones(input_dim) * torch.log(torch.tensor(initial_length_scale)))
        self.log_signal_variance = nn.Parameter(torch.log(torch.tensor(initial_signal_variance)))
        self.length_scale = torch.exp(self.log_length_scale)  # ROOT

    def forward(self, x1, x2):
        x1, x2 = x1 / self.length_scale, x2 / self.length_scale
        sqdist = (x1 ** 2).sum(1, keepdim=True) + (x2 ** 2).sum(1) - 2 * x1 @ x2.t()
        return torch.exp(self.log_signal_variance) * torch.exp(-0.5 * sqdist)


def negative_log_likelihood(kernel, log_noise, x, y):
    K = kernel(x, x) + torch.exp(log_noise) * torch.eye(x.size(0))
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y, L)
    return 0.5 * (y * alpha).sum() + torch.log(torch.diagonal(L)).sum()


torch.manual_seed(0)
x, y = torch.rand(12, 2), torch.randn(12, 1)
kernel = ARDKernel(input_dim=2)
log_noise = nn.Parameter(torch.tensor(-2.0))
optimizer = torch.optim.Adam(list(kernel.parameters()) + [log_noise], lr=0.01)
for i in range(3):
    optimizer.zero_grad()
    loss = negative_log_likelihood(kernel, log_noise, x, y)
    loss.backward()  # SYMPTOM
    optimizer.step()
