"""e3nn's NormActivation after PR 258: the irrep norms are computed squared (o3.Norm(squared=True)), clamped to epsilon**2 and only then square-rooted, so an all-zero irrep never reaches the square root at 0 and the gradients stay finite.

source: https://github.com/e3nn/e3nn/pull/258
kind: lookalike
"""
import torch
import torch.nn as nn


class Norm(nn.Module):
    def __init__(self, mul, dim=3, squared=False):
        super().__init__()
        self.mul, self.dim, self.squared = mul, dim, squared

    def forward(self, features):
        sq = features.reshape(*features.shape[:-1], self.mul, self.dim).pow(2).sum(-1)
        return sq if self.squared else sq.sqrt()


class NormActivation(nn.Module):
    def __init__(self, mul, scalar_nonlinearity, normalize=True, epsilon=1e-8, bias=False):
        super().__init__()
        self.mul = mul
        self.epsilon = epsilon
        self._eps_squared = epsilon * epsilon
        self.norm = Norm(mul, squared=True)
        self.scalar_nonlinearity = scalar_nonlinearity
        self.normalize, self.bias = normalize, bias

    def forward(self, features):
        norms = self.norm(features)
        norms[norms < self._eps_squared] = self._eps_squared
        norms = norms.sqrt()
        scalings = self.scalar_nonlinearity(norms)
        if self.normalize:
            scalings = scalings / norms
        return (scalings.unsqueeze(-1) * features.reshape(*features.shape[:-1], self.mul, 3)).flatten(-2)


torch.manual_seed(0)
linear = nn.Linear(3, 6, bias=False)
act = NormActivation(2, torch.sigmoid)
optimizer = torch.optim.SGD(linear.parameters(), lr=0.1)
node_features = torch.randn(5, 3)
node_features[3] = 0.0
out = act(linear(node_features))
loss = (out - torch.ones_like(out)).pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item(), "nan grads", torch.isnan(linear.weight.grad).sum().item(), "of", linear.weight.numel(),
      "nan weights", torch.isnan(linear.weight).sum().item())
