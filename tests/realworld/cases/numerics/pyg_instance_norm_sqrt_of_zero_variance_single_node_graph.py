"""PyTorch Geometric's `InstanceNorm.forward` divides by `var.sqrt()[batch] + self.eps`, adding the epsilon after the square root: a graph whose centred features are all zero in a channel (here a one-node graph in the mini-batch) has variance 0, the forward value stays finite, but the backward of `sqrt` at 0 is infinite times 0, so the graph classifier gets NaN gradients and a single Adam step makes its weights NaN without any error.

source: https://github.com/pyg-team/pytorch_geometric/issues/2559
kind: bug
symptom: silent
verified: the first backward gives NaN in the conv weight gradient and after one step every weight is NaN (loss nan from step 1 on); the look-alike trains with finite gradients and a decreasing loss
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def scatter_sum(src, index, dim_size):
    out = src.new_zeros((dim_size,) + src.shape[1:])
    return out.index_add_(0, index, src)


def degree(index, num_nodes):
    return scatter_sum(torch.ones_like(index, dtype=torch.float), index, num_nodes)


class InstanceNorm(nn.Module):
    def __init__(self, in_channels, eps=1e-5, affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(in_channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(in_channels)) if affine else None

    def forward(self, x, batch):
        batch_size = int(batch.max()) + 1
        norm = degree(batch, batch_size).clamp_(min=1).view(-1, 1)
        mean = scatter_sum(x, batch, batch_size) / norm
        x = x - mean[batch]
        var = scatter_sum(x * x, batch, batch_size) / norm
        out = x / (var.sqrt()[batch] + self.eps)  # ROOT
        if self.weight is not None:
            out = out * self.weight + self.bias
        return out


class GraphConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin_rel = nn.Linear(in_channels, out_channels)
        self.lin_root = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        aggr = scatter_sum(x[src], dst, x.size(0))
        return self.lin_rel(aggr) + self.lin_root(x)


class Net(nn.Module):
    def __init__(self, in_channels=4, hidden=16, num_classes=2):
        super().__init__()
        self.conv1 = GraphConv(in_channels, hidden)
        self.norm1 = InstanceNorm(hidden)
        self.conv2 = GraphConv(hidden, hidden)
        self.norm2 = InstanceNorm(hidden)
        self.lin = nn.Linear(hidden, num_classes)

    def forward(self, x, edge_index, batch):
        x = F.relu(self.norm1(self.conv1(x, edge_index), batch))
        x = F.relu(self.norm2(self.conv2(x, edge_index), batch))
        num_graphs = int(batch.max()) + 1
        x = scatter_sum(x, batch, num_graphs) / degree(batch, num_graphs).view(-1, 1)
        return self.lin(x)


def make_batch():
    # three graphs: a 4-cycle, a 3-node path and a single isolated node
    sizes = [4, 3, 1]
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6)]
    edge_index = torch.tensor(edges + [(b, a) for a, b in edges]).t()
    batch = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
    x = torch.randn(sum(sizes), 4)
    y = torch.tensor([0, 1, 1])
    return x, edge_index, batch, y


model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, edge_index, batch, y = make_batch()

for step in range(5):
    loss = F.cross_entropy(model(x, edge_index, batch), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}, "
          f"nan in conv1 weights: {torch.isnan(model.conv1.lin_rel.weight).any().item()}")
