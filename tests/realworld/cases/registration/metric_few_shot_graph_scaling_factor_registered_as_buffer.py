"""metric-few-shot-graph's `GNNEmbeddingSimilarity` base class stores the metric scaling factor of its prototypical networks (TADAM's learnable temperature alpha, initialised at 7.5) with `self.register_buffer(...)`: a buffer is not in `model.parameters()`, so the optimizer never sees it and the scale that multiplies every query-prototype distance in the subclass's `get_queries_prototypes_correlations_batch` stays at its initial value for the whole training, with no error.

source: https://github.com/crisostomi/metric-few-shot-graph/commit/fe5432bd78b28afc7f2e831f170a4550f052c4d3
kind: bug
symptom: silent
verified: the metric scaling factor is still 7.500 after 150 episodes (in model.parameters(): False, last episode loss 2.470); the look-alike learns it (6.432, in model.parameters(): True, last loss 0.000)
"""
import abc

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)

N_WAY, K_SHOT, N_QUERY, FEATURES = 5, 5, 10, 16


class GraphEmbedder(nn.Module):
    """Stand-in for the GNN graph embedder: an MLP over pooled node features."""

    def __init__(self, feature_dim, embedding_dim=32):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.net = nn.Sequential(nn.Linear(feature_dim, 64), nn.ReLU(), nn.Linear(64, embedding_dim))

    def forward(self, x):
        return self.net(x)


class GNNEmbeddingSimilarity(nn.Module, abc.ABC):
    def __init__(self, feature_dim, num_classes, metric_scaling_factor):
        super().__init__()
        self.feature_dim = feature_dim
        self.num_classes = num_classes
        self.embedder = GraphEmbedder(feature_dim)
        self.register_buffer("metric_scaling_factor", torch.tensor(metric_scaling_factor))  # ROOT

    def forward(self, supports, support_labels, queries):
        embedded_supports = self.embedder(supports)
        embedded_queries = self.embedder(queries)
        prototypes = self.get_prototypes(embedded_supports, support_labels)
        return self.get_queries_prototypes_correlations_batch(embedded_queries, prototypes)

    def get_prototypes(self, embedded_supports, support_labels):
        return torch.stack([embedded_supports[support_labels == c].mean(0) for c in range(N_WAY)])

    @abc.abstractmethod
    def get_queries_prototypes_correlations_batch(self, embedded_queries, prototypes):
        ...


class PrototypicalNetwork(GNNEmbeddingSimilarity):
    def get_queries_prototypes_correlations_batch(self, embedded_queries, prototypes):
        distances = torch.cdist(embedded_queries, prototypes) ** 2
        distances = self.metric_scaling_factor * distances
        return -distances


def sample_episode(class_means):
    classes = torch.randperm(len(class_means))[:N_WAY]
    support_labels = torch.arange(N_WAY).repeat_interleave(K_SHOT)
    query_labels = torch.arange(N_WAY).repeat_interleave(N_QUERY)
    supports = class_means[classes][support_labels] + torch.randn(N_WAY * K_SHOT, FEATURES)
    queries = class_means[classes][query_labels] + torch.randn(N_WAY * N_QUERY, FEATURES)
    return supports, support_labels, queries, query_labels


class_means = torch.randn(20, FEATURES) * 1.5
model = PrototypicalNetwork(FEATURES, num_classes=20, metric_scaling_factor=7.5)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for episode in range(150):
    supports, support_labels, queries, query_labels = sample_episode(class_means)
    similarities = model(supports, support_labels, queries)
    loss = F.cross_entropy(similarities, query_labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

in_params = any(p is model.metric_scaling_factor for p in model.parameters())
print(f"metric scaling factor after training: {model.metric_scaling_factor.item():.3f} (in model.parameters(): {in_params})")
print(f"last episode loss: {loss.item():.3f}")
