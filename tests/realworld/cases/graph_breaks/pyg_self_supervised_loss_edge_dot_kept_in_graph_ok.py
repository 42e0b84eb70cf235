"""The self-supervised PyG loss of the thread after the fix: each edge term torch.dot(h_u, h_v) stays in the graph and the terms are summed over the edges, so loss.backward() reaches the GCN and the loss decreases.

source: https://github.com/pyg-team/pytorch_geometric/issues/3009
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Data:
    def __init__(self, x, edge_index):
        self.x, self.edge_index = x, edge_index


class GCNConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels)

    def forward(self, x, edge_index):
        n = x.size(0)
        adj = torch.eye(n)
        adj[edge_index[0], edge_index[1]] = 1.0
        deg = adj.sum(1, keepdim=True)
        return (adj / deg) @ self.lin(x)


class GCN(nn.Module):
    def __init__(self, num_features, hidden):
        super().__init__()
        self.conv1 = GCNConv(num_features, hidden)
        self.conv2 = GCNConv(hidden, hidden)

    def forward(self, data):
        x = F.relu(self.conv1(data.x, data.edge_index))
        return self.conv2(x, data.edge_index)


class SelfSupervLoss(nn.Module):
    def __init__(self):
        super(SelfSupervLoss, self).__init__()

    def forward(self, data):
        t1 = 0
        for s, d in data.edge_index.t().tolist():
            t1 = t1 - torch.dot(data.x[s], data.x[d])
        return t1 / data.edge_index.size(1)


torch.manual_seed(0)
x = torch.randn(30, 8)
edge_index = torch.randint(0, 30, (2, 60))
data = Data(x, edge_index)
model = GCN(8, 16)
criterion = SelfSupervLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
w0 = model.conv1.lin.weight.detach().clone()
for epoch in range(20):
    optimizer.zero_grad()
    h = model(data)
    loss = criterion(Data(h, data.edge_index))
    loss.backward()
    optimizer.step()
    if epoch in (0, 19):
        print("epoch", epoch, "loss", loss.item())
print("conv1 grad", model.conv1.lin.weight.grad is None,
      "moved", (model.conv1.lin.weight.detach() - w0).abs().max().item())
