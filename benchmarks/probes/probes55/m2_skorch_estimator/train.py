import torch
import torch.nn as nn
from estimator import NeuralNetRegressor


class MLP(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


X, y = torch.randn(64, 5), torch.randn(64, 1)
reg = NeuralNetRegressor(MLP, hidden=16).initialize()
reg.fit(X, y)
reg.fit(X, y)
w0 = reg.module_.net[0].weight.clone()
reg.partial_fit(X, y)
print("after refit moved:", (reg.module_.net[0].weight - w0).abs().max().item())
