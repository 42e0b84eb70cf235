"""Wolf's Affine coupling transform with the maintainer's out-of-place form from the PR thread: scale = log_scale.mul(0.5).tanh().mul(self.alpha).add(1.0) leaves the chunk views of the network output untouched, so the flow trains.

source: https://github.com/XuezheMax/wolf/pull/1
kind: lookalike
"""
import torch
import torch.nn as nn


class Affine:
    def __init__(self, dim, alpha):
        self.dim = dim
        self.alpha = alpha

    def calc_params(self, params):
        mu, log_scale = params.chunk(2, dim=self.dim)
        scale = log_scale.mul(0.5).tanh().mul(self.alpha).add(1.0)
        return mu, scale

    @staticmethod
    def fwd(z, params):
        mu, scale = params
        z = scale * z + mu
        logdet = scale.log().view(z.size(0), -1).sum(dim=1)
        return z, logdet


class NICE(nn.Module):
    def __init__(self, in_channels, hidden_channels=16, alpha=1.0):
        super().__init__()
        self.z1_channels = in_channels // 2
        out_channels = in_channels - self.z1_channels
        self.net = nn.Sequential(nn.Conv2d(self.z1_channels, hidden_channels, 3, padding=1), nn.ELU(),
                                 nn.Conv2d(hidden_channels, 2 * out_channels, 3, padding=1))
        self.transform = Affine(dim=1, alpha=alpha)

    def forward(self, input):
        z1, z2 = input.split([self.z1_channels, input.size(1) - self.z1_channels], dim=1)
        params = self.transform.calc_params(self.net(z1))
        z2, logdet = self.transform.fwd(z2, params)
        return torch.cat([z1, z2], dim=1), logdet


torch.manual_seed(0)
flow = NICE(in_channels=4)
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
x = torch.randn(8, 4, 8, 8)
for step in range(5):
    z, logdet = flow(x)
    loss = (0.5 * z.pow(2).flatten(1).sum(1) - logdet).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("nll", loss.item())
