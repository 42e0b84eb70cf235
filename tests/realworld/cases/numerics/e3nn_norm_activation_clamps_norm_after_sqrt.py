"""e3nn's NormActivation computed the irrep norms with o3.Norm (a square root) and only then clamped norms below epsilon: an all-zero irrep (a node with no signal, a padded atom) has norm 0, the clamp's backward sends it a zero gradient, and the square root's backward turns 0 / (2 * sqrt(0)) into NaN, which spreads into every weight of the layer that produced the features.

source: https://github.com/e3nn/e3nn/pull/258
kind: bug
symptom: silent
verified: the loss is finite (1.0233) but 18 of 18 weight gradients of the preceding linear layer are NaN and the weights are all NaN after one SGD step; with the squared norm clamped to epsilon**2 before the sqrt (the fix, commit 5815a51 of the PR) the loss is the same and every gradient is finite
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
        self.norm = Norm(mul)  # ROOT
        self.scalar_nonlinearity = scalar_nonlinearity
        self.register_buffer("epsilon", torch.as_tensor(epsilon))
        self.normalize, self.bias = normalize, bias

    def forward(self, features):
        norms = self.norm(features)
        if self.normalize:
            epsilon_norms = norms.clone()
            epsilon_norms[epsilon_norms < self.epsilon] = self.epsilon
            scalings = self.scalar_nonlinearity(epsilon_norms) / epsilon_norms
        else:
            scalings = self.scalar_nonlinearity(norms)
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
