"""leaf-audio-pytorch's GaborConstraint without the no_grad block (the fix the issue proposes): the clamp of the Gabor kernel stays differentiable, so the complex convolution's _kernel Parameter gets gradients and the filterbank learns next to the PCEN compression.

source: https://github.com/denfed/leaf-audio-pytorch/issues/3
kind: lookalike
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def gabor_filters(kernel, size):
    t = torch.arange(-(size // 2), (size + 1) // 2, dtype=kernel.dtype)
    center_frequencies, sigmas = kernel[:, 0:1], kernel[:, 1:2]
    denominator = 1.0 / (math.sqrt(2 * math.pi) * sigmas)
    gaussian = torch.exp(-t.pow(2) / (2 * sigmas.pow(2)))
    sinusoid = center_frequencies * t
    return denominator * gaussian * torch.cos(sinusoid), denominator * gaussian * torch.sin(sinusoid)


class GaborConstraint(nn.Module):
    def __init__(self, kernel_size):
        super(GaborConstraint, self).__init__()
        self._kernel_size = kernel_size

    def forward(self, kernel_data):
        mu_lower = 0.
        mu_upper = math.pi
        sigma_lower = 4 * math.sqrt(2 * math.log(2)) / math.pi
        sigma_upper = self._kernel_size * math.sqrt(2 * math.log(2)) / math.pi
        clipped_mu = torch.clamp(kernel_data[:, 0], mu_lower, mu_upper)
        clipped_sigma = torch.clamp(kernel_data[:, 1], sigma_lower, sigma_upper)
        return torch.stack([clipped_mu, clipped_sigma], dim=1)


class GaborConv1D(nn.Module):
    def __init__(self, filters, kernel_size, strides, padding):
        super().__init__()
        self._filters = filters // 2
        self._kernel_size = kernel_size
        self._strides = strides
        self._padding = padding
        mu = torch.linspace(0.1, 2.5, self._filters)
        sigma = torch.linspace(20.0, 6.0, self._filters)
        self._kernel = nn.Parameter(torch.stack([mu, sigma], dim=1), requires_grad=True)
        self.constraint = GaborConstraint(self._kernel_size)

    def forward(self, x):
        kernel = self.constraint(self._kernel)
        real_filters, img_filters = gabor_filters(kernel, self._kernel_size)
        stacked_filters = torch.stack([real_filters, img_filters], dim=1)
        stacked_filters = stacked_filters.view(2 * self._filters, self._kernel_size).unsqueeze(1)
        return F.conv1d(x, stacked_filters, stride=self._strides, padding=self._padding)


class PCENLayer(nn.Module):
    def __init__(self, n_filters, alpha=0.96, smooth_coef=0.04, delta=2.0, root=2.0, floor=1e-6):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((n_filters, 1), alpha))
        self.delta = nn.Parameter(torch.full((n_filters, 1), delta))
        self.root = nn.Parameter(torch.full((n_filters, 1), root))
        self.smooth_coef, self.floor = smooth_coef, floor

    def forward(self, x):
        smoother = x.mean(dim=-1, keepdim=True)  # stand-in for the EMA smoother
        one_over_root = 1.0 / self.root
        return ((x / (self.floor + smoother) ** self.alpha + self.delta) ** one_over_root
                - self.delta ** one_over_root)


class Leaf(nn.Module):
    def __init__(self, n_filters=16, window_len=65, sample_rate=16000):
        super().__init__()
        self._complex_conv = GaborConv1D(2 * n_filters, window_len, 1, window_len // 2)
        self._pool = nn.AvgPool1d(kernel_size=80, stride=40)
        self._compression_fn = PCENLayer(n_filters)

    def forward(self, x):
        outputs = self._complex_conv(x)
        outputs = outputs.pow(2)
        outputs = outputs.view(outputs.size(0), -1, 2, outputs.size(-1)).sum(dim=2)  # squared modulus
        outputs = self._pool(outputs)
        return self._compression_fn(outputs)


torch.manual_seed(0)
a = Leaf()
x = torch.rand(1, 1, 4000)
a.train()
k0 = a._complex_conv._kernel.detach().clone()
opt = torch.optim.Adam(a.parameters(), lr=0.002, betas=(0.9, 0.999), eps=1e-08, weight_decay=1e-6, amsgrad=True)
for step in range(30):
    b = a(x)
    b_gt = torch.ones_like(b)
    loss = torch.norm((b - b_gt).view(1, -1), p=2, dim=-1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step in (0, 29):
        print("step", step, "loss", loss.item())
print("kernel grad None", a._complex_conv._kernel.grad is None,
      "moved", (a._complex_conv._kernel.detach() - k0).abs().max().item())
