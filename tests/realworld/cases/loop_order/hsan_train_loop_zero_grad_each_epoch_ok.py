"""HSAN's training loop with optimizer.zero_grad() at each epoch, so each Adam step uses that epoch's gradient only.

source: https://github.com/yueliu1999/HSAN/issues/6
kind: lookalike
verified: the gradient stepped on equals the epoch's own gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class hard_sample_aware_network(nn.Module):
    def __init__(self, input_dim, hidden_dim, act, n_num):
        super().__init__()
        self.AE1 = nn.Linear(input_dim, hidden_dim)
        self.AE2 = nn.Linear(input_dim, hidden_dim)
        self.SE1 = nn.Linear(n_num, hidden_dim)
        self.SE2 = nn.Linear(n_num, hidden_dim)
        self.alpha = nn.Parameter(torch.Tensor(1, ).fill_(0.99))
        self.act = act

    def forward(self, x, A):
        Z1 = F.normalize(self.act(self.AE1(x)), dim=1, p=2)
        Z2 = F.normalize(self.act(self.AE2(x)), dim=1, p=2)
        E1 = F.normalize(self.SE1(A), dim=1, p=2)
        E2 = F.normalize(self.SE2(A), dim=1, p=2)
        return Z1, Z2, E1, E2


def comprehensive_similarity(Z1, Z2, E1, E2, alpha):
    Z1_Z2 = torch.cat([torch.cat([Z1 @ Z1.T, Z1 @ Z2.T], dim=1), torch.cat([Z2 @ Z1.T, Z2 @ Z2.T], dim=1)], dim=0)
    E1_E2 = torch.cat([torch.cat([E1 @ E1.T, E1 @ E2.T], dim=1), torch.cat([E2 @ E1.T, E2 @ E2.T], dim=1)], dim=0)
    return alpha * Z1_Z2 + (1 - alpha) * E1_E2


def hard_sample_aware_infoNCE(S, node_num, temperature=1.0):
    labels = torch.cat([torch.arange(node_num, 2 * node_num), torch.arange(node_num)])
    S = S.masked_fill(torch.eye(2 * node_num, dtype=torch.bool), -1e9)
    return F.cross_entropy(S / temperature, labels)


torch.manual_seed(0)
node_num, input_dim = 32, 16
X = torch.randn(node_num, input_dim)
A = (torch.rand(node_num, node_num) < 0.1).float()
model = hard_sample_aware_network(input_dim, 32, nn.PReLU(), node_num)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(10):
    model.train()
    optimizer.zero_grad()
    Z1, Z2, E1, E2 = model(X, A)
    S = comprehensive_similarity(Z1, Z2, E1, E2, model.alpha)
    loss = hard_sample_aware_infoNCE(S, node_num)
    loss.backward()
    optimizer.step()
