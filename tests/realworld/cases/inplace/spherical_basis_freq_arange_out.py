"""reset_parameters fills the frequency Parameter with torch.arange(out=...) and scales it in place.

source: https://github.com/divelab/DIG/issues/103
kind: bug
symptom: crash
verified: functions with out=... arguments don't support automatic differentiation
"""
import math

import torch
import torch.nn as nn


class dist_emb(nn.Module):
    def __init__(self, num_radial, cutoff=5.0):
        super(dist_emb, self).__init__()
        self.cutoff = cutoff
        self.freq = nn.Parameter(torch.Tensor(num_radial))
        self.reset_parameters()

    def reset_parameters(self):
        torch.arange(1, self.freq.numel() + 1, out=self.freq).mul_(math.pi)  # ROOT

    def forward(self, dist):
        dist = dist.unsqueeze(-1) / self.cutoff
        return torch.sin(self.freq * dist)


torch.manual_seed(0)
emb = dist_emb(num_radial=6)
emb(torch.rand(10) * 5).sum().backward()
