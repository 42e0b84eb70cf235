"""The same DGL ARMA model with the stacks summed out of place (output = output + feats): the ReLU output of the first stack is left as its backward saved it and the two-stack model trains.

source: https://github.com/dmlc/dgl/issues/4202
kind: lookalike
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def glorot(tensor):
    stdv = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    tensor.data.uniform_(-stdv, stdv)


class ARMAConv(nn.Module):
    def __init__(self, in_dim, out_dim, num_stacks, num_layers, activation=None, dropout=0.0):
        super(ARMAConv, self).__init__()
        self.K, self.T, self.activation = num_stacks, num_layers, activation
        self.dropout = nn.Dropout(p=dropout)
        self.w_0 = nn.ModuleDict({str(k): nn.Linear(in_dim, out_dim, bias=False) for k in range(self.K)})
        self.w = nn.ModuleDict({str(k): nn.Linear(out_dim, out_dim, bias=False) for k in range(self.K)})
        self.v = nn.ModuleDict({str(k): nn.Linear(in_dim, out_dim, bias=False) for k in range(self.K)})
        self.bias = nn.Parameter(torch.zeros(self.K, self.T, 1, out_dim))
        for k in range(self.K):
            glorot(self.w_0[str(k)].weight)
            glorot(self.w[str(k)].weight)
            glorot(self.v[str(k)].weight)

    def forward(self, adj, feats):
        init_feats = feats
        degs = adj.sum(1).clamp(min=1)
        norm = torch.pow(degs, -0.5).unsqueeze(1)
        output = None
        for k in range(self.K):
            feats = init_feats
            for t in range(self.T):
                feats = feats * norm
                feats = adj @ feats  # g.update_all(fn.copy_u('h', 'm'), fn.sum('m', 'h'))
                feats = feats * norm
                if t == 0:
                    feats = self.w_0[str(k)](feats)
                else:
                    feats = self.w[str(k)](feats)
                feats += self.dropout(self.v[str(k)](init_feats))
                feats += self.v[str(k)](self.dropout(init_feats))
                feats += self.bias[k][t]
                if self.activation is not None:
                    feats = self.activation(feats)
            if output is None:
                output = feats
            else:
                output = output + feats
        return output / self.K


class ARMA4NC(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, num_stacks, num_layers, activation=None, dropout=0.0):
        super(ARMA4NC, self).__init__()
        self.conv1 = ARMAConv(in_dim, hid_dim, num_stacks, num_layers, activation, dropout)
        self.conv2 = ARMAConv(hid_dim, out_dim, num_stacks, num_layers, activation, dropout)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, adj, feats):
        feats = F.relu(self.conv1(adj, feats))
        feats = self.dropout(feats)
        return self.conv2(adj, feats)


torch.manual_seed(0)
n = 40
adj = (torch.rand(n, n) < 0.1).float()
adj = ((adj + adj.T) > 0).float()
feats, labels = torch.randn(n, 16), torch.randint(0, 7, (n,))
train_mask = torch.rand(n) < 0.5
model = ARMA4NC(16, 8, 7, num_stacks=2, num_layers=1, activation=nn.ReLU(), dropout=0.5)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
model.train()
logits = model(adj, feats)
train_loss = F.cross_entropy(logits[train_mask], labels[train_mask])
opt.zero_grad()
train_loss.backward()
opt.step()
print(train_loss.item())
