"""DeepCTR-Torch Dice after the v0.2.4 fix: alpha is an nn.Parameter, so it is registered, handed to the optimizer and learned like PReLU's slope.

source: https://github.com/shenweichen/DeepCTR-Torch/issues/93
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Dice(nn.Module):
    def __init__(self, emb_size, dim=2, epsilon=1e-8, device='cpu'):
        super(Dice, self).__init__()
        assert dim == 2 or dim == 3
        self.bn = nn.BatchNorm1d(emb_size, eps=epsilon)
        self.sigmoid = nn.Sigmoid()
        self.dim = dim
        if self.dim == 2:
            self.alpha = nn.Parameter(torch.zeros((emb_size,)).to(device))
        else:
            self.alpha = nn.Parameter(torch.zeros((emb_size, 1)).to(device))

    def forward(self, x):
        assert x.dim() == self.dim
        x_p = self.sigmoid(self.bn(x))
        out = self.alpha * (1 - x_p) * x + x_p * x
        return out


class DNN(nn.Module):
    def __init__(self, inputs_dim, hidden_units, activation='dice'):
        super(DNN, self).__init__()
        hidden_units = [inputs_dim] + list(hidden_units)
        self.linears = nn.ModuleList([nn.Linear(hidden_units[i], hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])
        self.activation_layers = nn.ModuleList([Dice(hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])

    def forward(self, inputs):
        deep_input = inputs
        for fc, act in zip(self.linears, self.activation_layers):
            deep_input = act(fc(deep_input))
        return deep_input


torch.manual_seed(0)
dnn = DNN(12, (16, 8))
out_layer = nn.Linear(8, 1)
model = nn.Sequential(dnn, out_layer)
optim = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    x, y = torch.randn(32, 12), torch.randint(0, 2, (32, 1)).float()
    loss = F.binary_cross_entropy_with_logits(model(x), y)
    optim.zero_grad()
    loss.backward()
    optim.step()
dice = dnn.activation_layers[0]
print(len(list(model.parameters())), dice.alpha.abs().max().item())
