"""MACE get_params_options builds the optimizer's param groups module by module by name (embedding, interactions, products, readouts); the PolarMACE subclass adds lr_source_maps, which no group names, so it is silently left out of the optimizer and stays at its initialization.

source: https://github.com/ACEsuit/mace/pull/1529
kind: bug
symptom: silent
verified: after 3 AMSGrad steps lr_source_maps[0].weight has a gradient (max abs 13.0) but is unchanged (0.0); with a param group for it the weight moves 0.0030
"""
import argparse

import torch
import torch.nn as nn


class MACE(nn.Module):
    def __init__(self, num_elements=4, hidden=16, num_interactions=2):
        super().__init__()
        self.node_embedding = nn.Embedding(num_elements, hidden)
        self.interactions = nn.ModuleList([nn.ModuleDict({"linear": nn.Linear(hidden, hidden),
                                                          "skip_tp": nn.Linear(hidden, hidden)})
                                           for _ in range(num_interactions)])
        self.products = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(num_interactions)])
        self.readouts = nn.ModuleList([nn.Linear(hidden, 1) for _ in range(num_interactions)])

    def node_features(self, species):
        feats, outs = self.node_embedding(species), []
        for inter, prod, read in zip(self.interactions, self.products, self.readouts):
            feats = prod(torch.tanh(inter["linear"](feats) + inter["skip_tp"](feats)))
            outs.append(read(feats))
        return feats, torch.stack(outs).sum(0)

    def forward(self, species):
        return self.node_features(species)[1].sum()


class PolarMACE(MACE):
    def __init__(self, hidden=16, **kwargs):
        super().__init__(hidden=hidden, **kwargs)
        self.lr_source_maps = nn.ModuleList([nn.Linear(hidden, 1) for _ in range(2)])

    def forward(self, species):
        feats, energy = self.node_features(species)
        charges = sum(m(feats) for m in self.lr_source_maps)
        return energy.sum() + (charges ** 2).sum()


def get_params_options(args, model):
    decay_interactions, no_decay_interactions = {}, {}
    for name, param in model.interactions.named_parameters():
        if "linear.weight" in name or "skip_tp.weight" in name:
            decay_interactions[name] = param
        else:
            no_decay_interactions[name] = param
    param_options = dict(  # ROOT
        params=[
            {"name": "embedding", "params": model.node_embedding.parameters(), "weight_decay": 0.0},
            {"name": "interactions_decay", "params": list(decay_interactions.values()), "weight_decay": args.weight_decay},
            {"name": "interactions_no_decay", "params": list(no_decay_interactions.values()), "weight_decay": 0.0},
            {"name": "products", "params": model.products.parameters(), "weight_decay": args.weight_decay},
            {"name": "readouts", "params": model.readouts.parameters(), "weight_decay": 0.0},
        ],
        lr=args.lr,
        amsgrad=args.amsgrad,
    )
    return param_options


args = argparse.Namespace(lr=1e-3, weight_decay=5e-7, amsgrad=True)
torch.manual_seed(0)
model = PolarMACE()
optimizer = torch.optim.Adam(**get_params_options(args, model))
before = model.lr_source_maps[0].weight.detach().clone()
for step in range(3):
    species = torch.randint(0, 4, (10,))
    target = torch.randn(())
    loss = (model(species) - target) ** 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.lr_source_maps[0].weight.grad.abs().max().item(),
      (model.lr_source_maps[0].weight - before).abs().max().item())
