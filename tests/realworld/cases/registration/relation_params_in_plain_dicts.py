"""Per-relation weights and layers kept in plain dicts on the module: none of them is registered.

source: https://github.com/pytorch/pytorch/issues/632
kind: bug
symptom: silent
verified: model.waggrs[0]['w'] never changes, it is not in model.parameters()
"""
import torch
import torch.nn as nn


class RelNet(nn.Module):
    def __init__(self, numfeatures, numrel, n_relations=3):
        super().__init__()
        self.encoder = nn.Linear(numfeatures, numfeatures)
        self.waggrs = {}
        self.list_relations = {}
        for rel in range(n_relations):
            self.waggrs[rel] = {'w': nn.Parameter(1. + torch.randn(1, numrel)), 'b': nn.Parameter(torch.zeros(1, numrel))}  # ROOT
            self.list_relations[rel] = nn.Linear(numfeatures, numrel)

    def forward(self, x, rel):
        agg = self.waggrs[rel]
        return self.list_relations[rel](self.encoder(x)) * agg['w'] + agg['b']


torch.manual_seed(0)
model = RelNet(4, 2)
before = model.waggrs[0]['w'].detach().clone()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 2)
for _ in range(3):
    opt.zero_grad()
    loss = sum(((model(x, r) - y) ** 2).mean() for r in range(3))
    loss.backward()
    opt.step()
print(len(list(model.parameters())), torch.equal(before, model.waggrs[0]['w'].detach()))
