"""The PyG "Introduction by Example" GCN with its two GCNConv layers kept in a plain Python list (self.convs) instead of attributes: the list is not registered, model.parameters() is empty and building the Adam optimizer fails.

source: https://github.com/pyg-team/pytorch_geometric/issues/7478
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GCNConv(nn.Module):
    """Cut-down torch_geometric.nn.GCNConv: symmetric-normalised adjacency with self-loops."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, edge_index):
        n = x.size(0)
        adj = torch.zeros(n, n)
        adj[edge_index[0], edge_index[1]] = 1.0
        adj = adj + torch.eye(n)
        d = adj.sum(1).pow(-0.5)
        adj = d[:, None] * adj * d[None, :]
        return adj @ self.lin(x) + self.bias


class GCN(torch.nn.Module):
    def __init__(self, num_node_features, num_classes):
        super().__init__()
        self.convs = [GCNConv(num_node_features, 16), GCNConv(16, num_classes)]  # ROOT

    def forward(self, data):
        x, edge_index = data['x'], data['edge_index']
        x = self.convs[0](x, edge_index)
        x = F.relu(x)
        x = F.dropout(x, training=self.training)
        x = self.convs[1](x, edge_index)
        return F.log_softmax(x, dim=1)


torch.manual_seed(0)
data = {'x': torch.randn(40, 12), 'edge_index': torch.randint(0, 40, (2, 120)),
        'y': torch.randint(0, 5, (40,)), 'train_mask': torch.rand(40) < 0.5}
model = GCN(12, 5)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)  # SYMPTOM
model.train()
for epoch in range(200):
    optimizer.zero_grad()
    out = model(data)
    loss = F.nll_loss(out[data['train_mask']], data['y'][data['train_mask']])
    loss.backward()
    optimizer.step()
print(epoch, len(list(model.parameters())), loss.item())
