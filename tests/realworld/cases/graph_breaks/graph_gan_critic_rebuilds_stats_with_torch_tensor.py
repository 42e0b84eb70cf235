"""graph-neural-net-benchmark's Wasserstein-GAN critic `NetD` summarises a graph by two statistics (a degree histogram and a clustering-coefficient histogram), maps each to a score with its own small network (`stat_NNs`), and combines the two scores with a linear layer. It gathers the two scores with `torch.Tensor([degree_hist, clustering_coefs])`, which reads each one-element score out as a Python float and builds a brand-new leaf tensor: the combine layer trains, but no gradient ever reaches the per-statistic networks, which keep their initial weights, with no error (at most a warning about converting a tensor that requires grad to a scalar). The fix ("Fixed Gradient Propagation") concatenates the scores with `torch.cat`.

source: https://github.com/Barry0121/graph-neural-net-benchmark/commit/d390a2c37187388285a9c18bc2803dc861d32d95
kind: bug
symptom: silent
verified: after 30 critic steps the per-statistic networks' weights moved by 0 while the combine layer moved by 0.507; in the look-alike the per-statistic networks moved by 0.349
"""
import warnings

import numpy as np
import torch
from torch import nn

warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)


def degree_histogram(adj, bins):
    degrees = adj.sum(1) / max(len(adj) - 1, 1)
    return np.histogram(degrees, bins=bins, range=(0.0, 1.0))[0]


def clustering_histogram(adj, bins):
    deg = adj.sum(1)
    triangles = np.diag(adj @ adj @ adj) / 2
    coefs = np.where(deg > 1, 2 * triangles / np.maximum(deg * (deg - 1), 1), 0.0)
    return np.histogram(coefs, bins=bins, range=(0.0, 1.0))[0]


class SimpleNN(nn.Module):
    """Maps the vector of one statistic to a scalar in (-1, 1)."""

    def __init__(self, input_dim, hidden_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.Tanh(), nn.Linear(hidden_dim, 1), nn.Tanh())

    def forward(self, x):
        return self.net(x)


class NetD(nn.Module):
    def __init__(self, stat_input_dim=10, stat_hidden_dim=16, num_stat=2):
        super().__init__()
        self.stat_input_dim = stat_input_dim
        self.stat_NNs = nn.ModuleList(SimpleNN(stat_input_dim, stat_hidden_dim) for _ in range(num_stat))
        self.combine = nn.Sequential(nn.Linear(num_stat, 1, bias=False), nn.Tanh())

    def forward(self, adj):
        degree_hist = torch.from_numpy(degree_histogram(adj, self.stat_input_dim)).float()
        degree_hist = self.stat_NNs[0](degree_hist)
        clustering_coefs = torch.from_numpy(clustering_histogram(adj, self.stat_input_dim)).float()
        clustering_coefs = self.stat_NNs[1](clustering_coefs)
        stats = torch.Tensor([degree_hist, clustering_coefs])  # ROOT
        return self.combine(stats)


def random_graph(n, p):
    upper = np.triu(rng.random((n, n)) < p, 1).astype(np.float64)
    return upper + upper.T


netD = NetD()
optimizer = torch.optim.RMSprop(netD.parameters(), lr=5e-3)
stat_before = [p.detach().clone() for p in netD.stat_NNs.parameters()]
comb_before = netD.combine[0].weight.detach().clone()
for step in range(30):
    real = [random_graph(20, 0.4) for _ in range(4)]   # stands in for the training graphs
    fake = [random_graph(20, 0.1) for _ in range(4)]   # stands in for the generator's samples
    loss = -(torch.stack([netD(g) for g in real]).mean() - torch.stack([netD(g) for g in fake]).mean())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
stat_moved = max((p.detach() - b).abs().max().item() for p, b in zip(netD.stat_NNs.parameters(), stat_before))
comb_moved = (netD.combine[0].weight.detach() - comb_before).abs().max().item()
print(f"per-statistic networks moved by {stat_moved:.3g}, combine layer moved by {comb_moved:.3g}")
