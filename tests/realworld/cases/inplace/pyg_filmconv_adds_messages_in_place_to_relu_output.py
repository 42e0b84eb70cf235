"""PyG's FiLMConv adds the aggregated messages to its skip term with out += self.propagate(...): out is the output of the ReLU activation (act=ReLU() by default), which ReLU's backward needs, so training the FiLM example fails at loss.backward().

source: https://github.com/pyg-team/pytorch_geometric/issues/3621
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import BatchNorm1d, Linear, ModuleList, ReLU


class FiLMConv(torch.nn.Module):  # MessagePassing (mean aggregation) inlined; the multi-relation branches are left out
    def __init__(self, in_channels, out_channels, act=ReLU()):
        super().__init__()
        self.out_channels = out_channels
        self.act = act
        self.lins = ModuleList([Linear(in_channels, out_channels, bias=False)])
        self.films = ModuleList([Linear(in_channels, 2 * out_channels)])
        self.lin_skip = Linear(in_channels, self.out_channels, bias=False)
        self.film_skip = Linear(in_channels, 2 * self.out_channels, bias=False)

    def propagate(self, edge_index, x, beta, gamma, size=None):
        src, dst = edge_index
        msg = self.message(x[src], beta[dst], gamma[dst])
        out = torch.zeros(x.size(0), msg.size(-1)).index_add(0, dst, msg)
        count = torch.zeros(x.size(0)).index_add(0, dst, torch.ones(dst.numel())).clamp(min=1)
        return out / count.unsqueeze(-1)

    def forward(self, x, edge_index):
        if isinstance(x, Tensor):
            x = (x, x)
        beta, gamma = self.film_skip(x[1]).split(self.out_channels, dim=-1)
        out = gamma * self.lin_skip(x[1]) + beta
        if self.act is not None:
            out = self.act(out)
        beta, gamma = self.films[0](x[1]).split(self.out_channels, dim=-1)
        out += self.propagate(edge_index, x=self.lins[0](x[0]), beta=beta, gamma=gamma, size=None)  # ROOT
        return out

    def message(self, x_j, beta_i, gamma_i):
        out = gamma_i * x_j + beta_i
        if self.act is not None:
            out = self.act(out)
        return out


class Net(torch.nn.Module):  # examples/film.py
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.convs = ModuleList([FiLMConv(in_channels, hidden_channels)])
        for _ in range(num_layers - 2):
            self.convs.append(FiLMConv(hidden_channels, hidden_channels))
        self.convs.append(FiLMConv(hidden_channels, out_channels, act=None))
        self.norms = ModuleList([BatchNorm1d(hidden_channels) for _ in range(num_layers - 1)])

    def forward(self, x, edge_index):
        for conv, norm in zip(self.convs[:-1], self.norms):
            x = norm(conv(x, edge_index))
            x = F.dropout(x, p=self.dropout, training=self.training)
        return self.convs[-1](x, edge_index)


torch.manual_seed(0)
x, edge_index, y = torch.randn(30, 12), torch.randint(0, 30, (2, 90)), torch.randint(0, 2, (30, 6)).float()
model = Net(12, 16, 6, num_layers=3, dropout=0.1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
model.train()
optimizer.zero_grad()
loss = F.binary_cross_entropy_with_logits(model(x, edge_index), y)
loss.backward()  # SYMPTOM
optimizer.step()
print("loss", round(loss.item(), 4))
