"""SciTSR's table-structure network applies `F.dropout(x, p=self.dropout)` in forward; functional dropout defaults to training=True, so after model.eval() inference still drops activations at random (the PR replaces it with an nn.Dropout module).

source: https://github.com/Academic-Hammer/SciTSR/pull/16
kind: bug
symptom: silent
verified: after model.eval() two predictions of the same 40-vertex table graph give edge logits 0.097 apart (max abs) and 18 of 80 predicted edge labels differ; with nn.Dropout both predictions are identical
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphAttention(nn.Module):
    def __init__(self, dim, dropout):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, x, adj):
        att = (self.q(x) @ self.k(x).T) / x.size(-1) ** 0.5
        att = att.masked_fill(adj == 0, float('-inf')).softmax(-1)
        out = att @ self.v(x)
        return F.dropout(out, p=self.dropout)  # ROOT


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
