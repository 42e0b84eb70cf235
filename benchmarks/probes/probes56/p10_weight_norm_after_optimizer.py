"""Weight normalisation switched on by a flag, after the optimizer exists."""
import argparse
import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm

parser = argparse.ArgumentParser()
parser.add_argument("--wn", action="store_true", default=True)
args = parser.parse_args([])

net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 1))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
if args.wn:
    for layer in net:
        if isinstance(layer, nn.Linear):
            weight_norm(layer)  # ROOT
w0 = net[0].weight.detach().clone()
for _ in range(5):
    x = torch.randn(8, 6)
    loss = (net(x) - x.sum(1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("first layer moved:", (net[0].weight - w0).abs().max().item())
