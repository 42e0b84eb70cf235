"""A heterogeneous-graph GCN keeps one learnable nn.Embedding per extra node type in a plain Python dict (self.embeddings = {nt: nn.Embedding(...)}); a dict is not registered, so model.parameters() (and the optimizer) never see the embeddings: they get gradients every step but are never updated ("I don't think the weights of the embedding layers are being updated at all").

source: https://github.com/pyg-team/pytorch_geometric/issues/3604
kind: bug
symptom: silent
verified: model.parameters() holds 6 tensors (787 values) against 8 (987) with nn.ModuleDict; after 30 Adam steps the 'author' embedding has moved by 0.0 (max abs) although its .grad norm is 0.577 (gradients accumulate, never applied); with nn.ModuleDict it moves by 0.298 and the loss ends 0.0378 against 0.0496
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

attribute_embedding_length = 8
hidden_channels = 16
extra_node_types = ["author", "venue"]


class GCN(nn.Module):
    def __init__(self, x_dict, in_channels, out_channels, hidden_channels=hidden_channels):
        super().__init__()
        self.conv1 = nn.Linear(in_channels + 2 * attribute_embedding_length, hidden_channels)
        self.lin1 = nn.Linear(hidden_channels, hidden_channels)
        self.lin2 = nn.Linear(hidden_channels, out_channels)
        # learnable embeddings for all extra nodes:
        self.embeddings = {  # ROOT
            nt: torch.nn.Embedding(len(x_dict[nt]), attribute_embedding_length)
            for nt in extra_node_types
        }
        for nt in extra_node_types:
            self.embeddings[nt].requires_grad = True  # force trainable

    def forward(self, x_paper, adj_dict):
        msgs = [adj_dict[nt] @ self.embeddings[nt].weight for nt in extra_node_types]
        h = F.relu(self.conv1(torch.cat([x_paper, *msgs], dim=1)))
        h = F.relu(self.lin1(h))
        return self.lin2(h)


torch.manual_seed(0)
n_paper, n_author, n_venue = 40, 20, 5
x_dict = {"paper": torch.randn(n_paper, 12), "author": torch.arange(n_author), "venue": torch.arange(n_venue)}
adj_dict = {"author": (torch.rand(n_paper, n_author) < 0.15).float(), "venue": F.one_hot(torch.randint(0, n_venue, (n_paper,)), n_venue).float()}
y = torch.randint(0, 3, (n_paper,))
model = GCN(x_dict, 12, 3)
print("parameters", len(list(model.parameters())), sum(p.numel() for p in model.parameters()))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
before = model.embeddings["author"].weight.detach().clone()
for epoch in range(30):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x_dict["paper"], adj_dict), y)
    loss.backward()
    optimizer.step()
moved = (model.embeddings["author"].weight.detach() - before).abs().max().item()
print("author embedding moved", moved, "grad norm", model.embeddings["author"].weight.grad.norm().item(), "loss", loss.item())
