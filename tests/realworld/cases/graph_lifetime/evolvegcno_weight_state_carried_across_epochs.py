"""pytorch_geometric_temporal EvolveGCNO keeps the GRU-evolved weight in self.weight and feeds it back into the GRU at the next call; the weight left from the last snapshot of one epoch still belongs to that epoch's graph, which cost.backward() freed, so the second epoch's backward walks into it.

source: https://github.com/benedekrozemberczki/pytorch_geometric_temporal/issues/305
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn.functional as F
from torch.nn import GRU


def gcn_norm_dense(edge_index, edge_weight, num_nodes):
    A = torch.zeros(num_nodes, num_nodes)
    A[edge_index[0], edge_index[1]] = edge_weight
    A = A + torch.eye(num_nodes)
    deg_inv_sqrt = A.sum(1).pow(-0.5)
    return deg_inv_sqrt[:, None] * A * deg_inv_sqrt[None, :]


class GCNConv_Fixed_W(torch.nn.Module):
    def forward(self, W, x, edge_index, edge_weight):
        return gcn_norm_dense(edge_index, edge_weight, x.size(0)) @ (x @ W)


class EvolveGCNO(torch.nn.Module):
    def __init__(self, in_channels):
        super(EvolveGCNO, self).__init__()
        self.in_channels = in_channels
        self.weight = None
        self.initial_weight = torch.nn.Parameter(torch.Tensor(1, in_channels, in_channels))
        torch.nn.init.xavier_uniform_(self.initial_weight)
        self.recurrent_layer = GRU(input_size=self.in_channels, hidden_size=self.in_channels, num_layers=1)
        self.conv_layer = GCNConv_Fixed_W()

    def forward(self, X, edge_index, edge_weight=None):
        if self.weight is None:
            _, self.weight = self.recurrent_layer(self.initial_weight, self.initial_weight)
        else:
            _, self.weight = self.recurrent_layer(self.weight, self.weight)  # ROOT
        X = self.conv_layer(self.weight.squeeze(dim=0), X, edge_index, edge_weight)
        return X


class RecurrentGCN(torch.nn.Module):
    def __init__(self, node_features):
        super(RecurrentGCN, self).__init__()
        self.recurrent = EvolveGCNO(node_features)
        self.linear = torch.nn.Linear(node_features, 1)

    def forward(self, x, edge_index, edge_weight):
        h = self.recurrent(x, edge_index, edge_weight)
        h = F.relu(h)
        h = self.linear(h)
        return h


class Snapshot:
    def __init__(self, num_nodes=6, num_edges=10, node_features=4):
        self.x = torch.randn(num_nodes, node_features)
        self.edge_index = torch.randint(0, num_nodes, (2, num_edges))
        self.edge_attr = torch.rand(num_edges)
        self.y = torch.randn(num_nodes, 1)


torch.manual_seed(0)
train_dataset = [Snapshot() for _ in range(3)]
model = RecurrentGCN(node_features=4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
model.train()
for epoch in range(2):
    cost = 0
    for time, snapshot in enumerate(train_dataset):
        y_hat = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr)
        cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
    cost = cost / (time + 1)
    cost.backward()  # SYMPTOM
    optimizer.step()
    optimizer.zero_grad()
