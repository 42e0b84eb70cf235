"""The same OriLinearGNN with the node states started from zeros in a local variable on every forward (as the repository's later version does): each iteration's fixed-point loop builds a fresh graph, so each backward only walks the current one. The repository's model ends in nn.Softmax and is trained with CrossEntropyLoss, which applies softmax again (a bug of its own, the mechanism of numerics/mini_tutorial_sequential_softmax_module_before_cross_entropy): this look-alike returns the scores so that it is correct code.

source: https://github.com/LYuhang/GNN_Review/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn


class Xi(nn.Module):
    def __init__(self, ln, s):
        super().__init__()
        self.ln, self.s = ln, s
        self.linear = nn.Linear(2 * ln, s ** 2, bias=True)
        self.tanh = nn.Tanh()

    def forward(self, X):
        return self.tanh(self.linear(X)).view(-1, self.s, self.s)


class Rou(nn.Module):
    def __init__(self, ln, s):
        super().__init__()
        self.linear = nn.Linear(ln, s, bias=True)
        self.tanh = nn.Tanh()

    def forward(self, X):
        return self.tanh(self.linear(X))


class Hw(nn.Module):
    def __init__(self, ln, s, mu=0.9):
        super().__init__()
        self.ln, self.s, self.mu = ln, s, mu
        self.Xi, self.Rou = Xi(ln, s), Rou(ln, s)

    def forward(self, X, H, dg_list):
        A = self.Xi(X) * self.mu / self.s / dg_list.view(-1, 1, 1)
        b = self.Rou(torch.chunk(X, chunks=2, dim=1)[0])
        return torch.matmul(A, H.unsqueeze(2)).squeeze(-1) + b


class AggrSum(nn.Module):
    def __init__(self, node_num):
        super().__init__()
        self.V = node_num

    def forward(self, H, X_node):
        mask = torch.stack([X_node] * self.V, 0).float() == torch.arange(self.V).float().unsqueeze(1)
        return torch.mm(mask.float(), H)


class OriLinearGNN(nn.Module):
    def __init__(self, node_num, feat_dim, stat_dim, T):
        super().__init__()
        self.node_features = nn.Embedding(node_num, feat_dim)
        self.node_states = torch.zeros((node_num, stat_dim))
        self.linear = nn.Linear(feat_dim + stat_dim, 3)
        self.softmax = nn.Softmax(dim=-1)
        self.Hw, self.Aggr, self.T = Hw(feat_dim, stat_dim), AggrSum(node_num), T

    def forward(self, X_Node, X_Neis, dg_list):
        node_embeds = self.node_features(X_Node)
        neis_embeds = self.node_features(X_Neis)
        X = torch.cat((node_embeds, neis_embeds), 1)
        node_states = torch.zeros_like(self.node_states)
        for t in range(self.T):
            H = torch.index_select(node_states, 0, X_Node)
            H = self.Hw(X, H, dg_list)
            node_states = self.Aggr(H, X_Node)
        out = self.linear(torch.cat((self.node_features.weight, node_states), 1))
        return out


torch.manual_seed(0)
V = 18
edges = [(i, (i + 1) % V) for i in range(V)] + [(i, (i + 5) % V) for i in range(0, V, 3)]
node_inds, node_neis = [], []
for n in range(V):
    neis = sorted({b for a, b in edges if a == n} | {a for a, b in edges if b == n})
    node_inds += [n] * len(neis)
    node_neis += neis
node_inds, node_neis = torch.tensor(node_inds), torch.tensor(node_neis)
dg_list = torch.bincount(node_inds).float()[node_inds]
train_node_list = torch.tensor([0, 1, 2, 6, 7, 8, 12, 13, 14])
train_node_label = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
model = OriLinearGNN(node_num=V, feat_dim=2, stat_dim=2, T=5)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01)
criterion = nn.CrossEntropyLoss()
for ep in range(3):
    optimizer.zero_grad()
    output = model(node_inds, node_neis, dg_list)
    train_loss = criterion(output[train_node_list], train_node_label)
    train_loss.backward()
    optimizer.step()
print(ep, train_loss.item())
