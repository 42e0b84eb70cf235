"""graph-neural-networks-for-graph-classification stores its n_layers GCN layers in a plain list (self.layers = [...]): only the readout's two fully connected layers are registered, so the parameter count, the optimizer and the training cover a linear classifier on raw node features while the GCN weights stay at their random initialisation.

source: https://github.com/qbxlvnf11/graph-neural-networks-for-graph-classification/pull/3
kind: bug
symptom: silent
verified: model.parameters() holds 4 tensors (562 values) against 8 tensors (1906 values) with nn.ModuleList (the pull request); the GCN weights are never handed to Adam and keep their initial values, and after 40 Adam steps (lr 1e-2) the training loss is 0.535 against 0.0
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphConv(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.1)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x, A):
        return A @ (x @ self.weight) + self.bias


class GCN(nn.Module):
    def __init__(self, n_feat, n_class, n_layer=2, agg_hidden=32, fc_hidden=16):
        super().__init__()
        self.layers = [GraphConv(n_feat if i == 0 else agg_hidden, agg_hidden) for i in range(n_layer)]  # ROOT
        self.fc1 = nn.Linear(agg_hidden, fc_hidden)
        self.fc2 = nn.Linear(fc_hidden, n_class)

    def forward(self, x, A):
        for layer in self.layers:
            x = F.relu(layer(x, A))
        x = x.mean(dim=1)  # readout: average over nodes
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
n_graph, n_node, n_feat = 32, 10, 8
x = torch.randn(n_graph, n_node, n_feat)
A = (torch.rand(n_graph, n_node, n_node) < 0.3).float()
A = ((A + A.transpose(1, 2) + torch.eye(n_node)) > 0).float()
A = A / A.sum(-1, keepdim=True)
y = (torch.einsum('gij,gjk->gk', A, x)[:, 0] > 0).long()
model = GCN(n_feat, 2)
print(len(list(model.parameters())), sum(p.numel() for p in model.parameters()))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for it in range(40):
    loss = F.cross_entropy(model(x, A), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(it, round(loss.item(), 4))
