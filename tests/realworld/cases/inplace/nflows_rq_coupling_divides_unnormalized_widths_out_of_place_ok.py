"""nflows' PiecewiseRationalQuadraticCouplingTransform after the issue's fix: the spline parameters are scaled out of place, unnormalized_widths = unnormalized_widths / np.sqrt(hidden_features), so the ReLU output the transform net saved for backward is left untouched and the flow trains.

source: https://github.com/bayesiains/nflows/issues/89
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TransformNet(nn.Module):
    def __init__(self, in_features, out_features, hidden_features=64):
        super().__init__()
        self.hidden_features = hidden_features
        self.layers = nn.Sequential(nn.Linear(in_features, hidden_features), nn.ReLU(),
                                    nn.Linear(hidden_features, out_features), nn.ReLU())

    def forward(self, inputs, context=None):
        return self.layers(inputs)


def rational_quadratic_spline(inputs, unnormalized_widths, unnormalized_heights, unnormalized_derivatives):
    widths = F.softmax(unnormalized_widths, dim=-1)
    heights = F.softmax(unnormalized_heights, dim=-1)
    derivatives = F.softplus(unnormalized_derivatives) + 1e-3
    slope = (heights / widths * derivatives[..., :-1]).mean(-1)
    return inputs * slope, torch.log(slope)


class PiecewiseRationalQuadraticCouplingTransform(nn.Module):
    def __init__(self, features, num_bins=8):
        super().__init__()
        self.num_bins = num_bins
        self.half = features // 2
        self.transform_net = TransformNet(self.half, (features - self.half) * (3 * num_bins + 1))

    def forward(self, inputs):
        identity_split, transform_split = inputs[:, :self.half], inputs[:, self.half:]
        transform_params = self.transform_net(identity_split).reshape(inputs.shape[0], transform_split.shape[1], -1)
        unnormalized_widths = transform_params[..., : self.num_bins]
        unnormalized_heights = transform_params[..., self.num_bins : 2 * self.num_bins]
        unnormalized_derivatives = transform_params[..., 2 * self.num_bins :]
        if hasattr(self.transform_net, "hidden_features"):
            unnormalized_widths = unnormalized_widths / np.sqrt(self.transform_net.hidden_features)
            unnormalized_heights = unnormalized_heights / np.sqrt(self.transform_net.hidden_features)
        outputs, logabsdet = rational_quadratic_spline(transform_split, unnormalized_widths, unnormalized_heights,
                                                       unnormalized_derivatives)
        return torch.cat([identity_split, outputs], dim=1), logabsdet.sum(-1)


torch.manual_seed(0)
flow = PiecewiseRationalQuadraticCouplingTransform(features=6)
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
x = torch.randn(256, 6)
z, logabsdet = flow(x)
loss = -(-0.5 * (z ** 2).sum(-1) + logabsdet).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item())
