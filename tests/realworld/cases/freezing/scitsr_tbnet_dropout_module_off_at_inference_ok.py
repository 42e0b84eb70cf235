"""SciTSR's table-structure network as changed by the PR: the attention output goes through an nn.Dropout module, which model.eval() switches off.

source: https://github.com/Academic-Hammer/SciTSR/pull/16
kind: lookalike
verified: after model.eval() two predictions of the same graph are identical
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphAttention(nn.Module):
    def __init__(self, dim, dropout):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, adj):
        att = (self.q(x) @ self.k(x).T) / x.size(-1) ** 0.5
        att = att.masked_fill(adj == 0, float('-inf')).softmax(-1)
        out = att @ self.v(x)
        return self.dropout(out)


class TbNet(nn.Module):
    def __init__(self, num_node_features=8, hidden=32, num_classes=3, dropout=0.3):
        super().__init__()
        self.vertex_embed = nn.Linear(num_node_features, hidden)
        self.gat = GraphAttention(hidden, dropout)
        self.edge_classifier = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, nodes, adj, edges):
        h = F.relu(self.vertex_embed(nodes))
        h = h + self.gat(h, adj)
        return self.edge_classifier(torch.cat([h[edges[:, 0]], h[edges[:, 1]]], dim=1))


torch.manual_seed(0)
model = TbNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
nodes = torch.randn(40, 8)
adj = (torch.rand(40, 40) < 0.3).float() + torch.eye(40)
edges = torch.randint(0, 40, (80, 2))
labels = torch.randint(0, 3, (80,))
model.train()
for epoch in range(5):
    loss = F.cross_entropy(model(nodes, adj, edges), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()
with torch.no_grad():
    first = model(nodes, adj, edges)
    second = model(nodes, adj, edges)
assert torch.equal(first, second)
