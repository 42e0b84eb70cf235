"""OGB's full-batch ogbl-ddi example builds its Adam optimizer from `list(emb.parameters()) + list(predictor.parameters())`: the GCN encoder that sits between the node embeddings and the link predictor gets gradients every step but is never updated, so the run trains embeddings and predictor around a GCN frozen at its random initialisation.

source: https://github.com/snap-stanford/ogb/commit/02b6e5f2b84d986a5b7f9c0f786e023718105c15
kind: bug
symptom: silent
verified: after 3 epochs the GCN weights are unchanged (GCN changed: False) although their gradients are non-zero, while the embeddings and the predictor moved; the look-alike's GCN changed: True
"""
import torch
import torch.nn.functional as F
from torch.nn import Parameter
from torch.utils.data import DataLoader

torch.manual_seed(0)


def glorot(tensor):
    torch.nn.init.xavier_uniform_(tensor)


class GCNConv(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super(GCNConv, self).__init__()
        self.weight = Parameter(torch.Tensor(in_channels, out_channels))
        self.root_weight = Parameter(torch.Tensor(in_channels, out_channels))
        self.bias = Parameter(torch.Tensor(out_channels))
        self.reset_parameters()

    def reset_parameters(self):
        glorot(self.weight)
        glorot(self.root_weight)
        torch.nn.init.zeros_(self.bias)

    def forward(self, x, adj):
        return adj @ x @ self.weight + self.bias


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, dropout):
        super(GCN, self).__init__()
        self.convs = torch.nn.ModuleList()
        self.convs.append(GCNConv(in_channels, hidden_channels))
        for _ in range(num_layers - 2):
            self.convs.append(GCNConv(hidden_channels, hidden_channels))
        self.convs.append(GCNConv(hidden_channels, out_channels))
        self.dropout = dropout

    def reset_parameters(self):
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, x, adj):
        for conv in self.convs[:-1]:
            x = F.dropout(F.relu(conv(x, adj)), p=self.dropout, training=self.training)
        return self.convs[-1](x, adj)


class LinkPredictor(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, dropout):
        super(LinkPredictor, self).__init__()
        self.lins = torch.nn.ModuleList()
        self.lins.append(torch.nn.Linear(in_channels, hidden_channels))
        for _ in range(num_layers - 2):
            self.lins.append(torch.nn.Linear(hidden_channels, hidden_channels))
        self.lins.append(torch.nn.Linear(hidden_channels, out_channels))
        self.dropout = dropout

    def reset_parameters(self):
        for lin in self.lins:
            lin.reset_parameters()

    def forward(self, x_i, x_j):
        x = x_i * x_j
        for lin in self.lins[:-1]:
            x = F.dropout(F.relu(lin(x)), p=self.dropout, training=self.training)
        return torch.sigmoid(self.lins[-1](x))


def train(model, predictor, x, adj, num_nodes, pos_train_edge, optimizer, batch_size):
    model.train()
    predictor.train()
    total_loss = total_examples = 0
    for perm in DataLoader(range(pos_train_edge.size(0)), batch_size, shuffle=True):
        optimizer.zero_grad()
        h = model(x, adj)
        edge = pos_train_edge[perm].t()
        pos_out = predictor(h[edge[0]], h[edge[1]])
        pos_loss = -torch.log(pos_out + 1e-15).mean()
        edge = torch.randint(0, num_nodes, (2, perm.size(0)))  # dense negative sampling stand-in
        neg_out = predictor(h[edge[0]], h[edge[1]])
        neg_loss = -torch.log(1 - neg_out + 1e-15).mean()
        loss = pos_loss + neg_loss
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * pos_out.size(0)
        total_examples += pos_out.size(0)
    return total_loss / total_examples


num_nodes, hidden = 60, 32
pos_train_edge = torch.randint(0, num_nodes, (400, 2))
adj = torch.zeros(num_nodes, num_nodes)
adj[pos_train_edge[:, 0], pos_train_edge[:, 1]] = 1.0
adj = ((adj + adj.t()) > 0).float() + torch.eye(num_nodes)
deg_inv_sqrt = adj.sum(dim=1).pow(-0.5)
adj = deg_inv_sqrt.view(-1, 1) * adj * deg_inv_sqrt.view(1, -1)

model = GCN(hidden, hidden, hidden, 2, 0.5)
emb = torch.nn.Embedding(num_nodes, hidden)
predictor = LinkPredictor(hidden, hidden, 1, 2, 0.5)

torch.nn.init.xavier_uniform_(emb.weight)
model.reset_parameters()
predictor.reset_parameters()
optimizer = torch.optim.Adam(list(emb.parameters()) + list(predictor.parameters()), lr=0.01)  # ROOT
gcn_before = [p.detach().clone() for p in model.parameters()]
for epoch in range(1, 4):
    loss = train(model, predictor, emb.weight, adj, num_nodes, pos_train_edge, optimizer, 128)
    print(f"epoch {epoch}: loss {loss:.4f}")
gcn_changed = any(not torch.equal(a, b) for a, b in zip(gcn_before, model.parameters()))
grad_norm = sum(p.grad.norm().item() for p in model.parameters() if p.grad is not None)
print(f"GCN changed: {gcn_changed}  (GCN gradient norm at the last step {grad_norm:.4f})")
