"""InfoMax builds its layer stacks with nn.ModuleList over a generator; the summary shows `.0` names.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/1437
kind: lookalike
"""
import torch
import torch.nn as nn
from itertools import tee


def pairwise(iterable):
    a, b = tee(iterable)
    next(b, None)
    return zip(a, b)


class InfoMax(nn.Module):
    def __init__(self, config):
        super(InfoMax, self).__init__()
        self.network_config = config["Network Architecture"]
        self.start_dim = 8
        self.Shared_Layers = nn.ModuleList(
            nn.Linear(i, o) for i, o in pairwise([self.start_dim, *self.network_config['Shared_Layers']]))
        self.Decode_Layers = nn.ModuleList(
            nn.Linear(i, o) for i, o in pairwise([self.network_config['Shared_Layers'][-1], 6]))
        self.Classification_Layer = nn.Linear(6, 1)

    def forward(self, x):
        for layer in self.Shared_Layers:
            x = torch.relu(layer(x))
        for layer in self.Decode_Layers:
            x = torch.relu(layer(x))
        return self.Classification_Layer(x)


torch.manual_seed(0)
model = InfoMax({"Network Architecture": {"Shared_Layers": [16, 12]}})
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for _ in range(10):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
