"""MACE's training script builds the Adam parameter groups by hand, module by module (embedding, interactions with and without decay, products, readouts), to give each its own weight decay; a parameter added to the model elsewhere (here the trainable Bessel weights of the radial embedding) is in no group, so it gets gradients at every step and never changes.

source: https://github.com/ACEsuit/mace/issues/525
kind: bug
symptom: silent
verified: the optimizer holds 19 of the model's 20 parameter tensors; after 25 Adam steps radial_embedding.bessel_weights has a gradient (norm 1.71, accumulated since no optimizer zeroes it) and has moved 0.0, against 0.189 with the remaining parameters appended as a default group (the behaviour the issue asks for); the energy loss ends at 0.0878 against 0.0752
"""
import math

import torch
import torch.nn as nn


class BesselBasis(nn.Module):
    def __init__(self, r_max, num_basis=8, trainable=True):
        super().__init__()
        bessel_weights = math.pi / r_max * torch.linspace(1.0, num_basis, num_basis)
        if trainable:
            self.bessel_weights = nn.Parameter(bessel_weights)
        else:
            self.register_buffer("bessel_weights", bessel_weights)
        self.prefactor = math.sqrt(2.0 / r_max)

    def forward(self, x):
        return self.prefactor * torch.sin(self.bessel_weights * x) / x


class InteractionBlock(nn.Module):
    def __init__(self, channels, num_basis):
        super().__init__()
        self.linear_up = nn.Linear(channels, channels, bias=False)
        self.conv_tp_weights = nn.Linear(num_basis, channels)
        self.linear = nn.Linear(channels, channels, bias=False)
        self.skip_tp_full = nn.Linear(channels, channels, bias=False)

    def forward(self, node_feats, edge_feats, sender, receiver):
        messages = self.linear_up(node_feats)[sender] * self.conv_tp_weights(edge_feats)
        agg = torch.zeros_like(node_feats).index_add_(0, receiver, messages)
        return self.linear(agg) + self.skip_tp_full(node_feats)


class MACE(nn.Module):
    def __init__(self, num_elements=3, channels=16, num_basis=8, num_interactions=2, r_max=5.0):
        super().__init__()
        self.node_embedding = nn.Linear(num_elements, channels, bias=False)
        self.radial_embedding = BesselBasis(r_max, num_basis, trainable=True)
        self.interactions = nn.ModuleList([InteractionBlock(channels, num_basis) for _ in range(num_interactions)])
        self.products = nn.ModuleList([nn.Linear(channels, channels) for _ in range(num_interactions)])
        self.readouts = nn.ModuleList([nn.Linear(channels, 1) for _ in range(num_interactions)])

    def forward(self, node_attrs, lengths, sender, receiver, batch, num_graphs):
        node_feats = self.node_embedding(node_attrs)
        edge_feats = self.radial_embedding(lengths)
        energy = torch.zeros(num_graphs)
        for interaction, product, readout in zip(self.interactions, self.products, self.readouts):
            node_feats = torch.tanh(product(interaction(node_feats, edge_feats, sender, receiver)))
            energy = energy.index_add(0, batch, readout(node_feats).squeeze(-1))
        return energy


def make_optimizer(model, lr=0.01, weight_decay=5e-7):
    decay_interactions = {}
    no_decay_interactions = {}
    for name, param in model.interactions.named_parameters():
        if "linear.weight" in name or "skip_tp_full.weight" in name:
            decay_interactions[name] = param
        else:
            no_decay_interactions[name] = param
    param_options = dict(
        params=[  # ROOT
            {"name": "embedding", "params": model.node_embedding.parameters(), "weight_decay": 0.0},
            {"name": "interactions_decay", "params": list(decay_interactions.values()), "weight_decay": weight_decay},
            {"name": "interactions_no_decay", "params": list(no_decay_interactions.values()), "weight_decay": 0.0},
            {"name": "products", "params": model.products.parameters(), "weight_decay": weight_decay},
            {"name": "readouts", "params": model.readouts.parameters(), "weight_decay": 0.0},
        ],
        lr=lr,
        amsgrad=True,
    )
    return torch.optim.Adam(**param_options)


torch.manual_seed(0)
model = MACE()
optimizer = make_optimizer(model)
print("optimizer tensors", sum(len(g["params"]) for g in optimizer.param_groups), "of", len(list(model.parameters())))
num_graphs, atoms = 4, 6
node_attrs = torch.eye(3)[torch.randint(0, 3, (num_graphs * atoms,))]
batch = torch.arange(num_graphs).repeat_interleave(atoms)
sender = torch.randint(0, atoms, (60,)) + atoms * torch.randint(0, num_graphs, (60,))
receiver = (sender // atoms) * atoms + torch.randint(0, atoms, (60,))
lengths = torch.rand(60, 1) * 4.0 + 0.5
energies = torch.randn(num_graphs)
w0 = model.radial_embedding.bessel_weights.detach().clone()
for step in range(25):
    optimizer.zero_grad()
    pred = model(node_attrs, lengths, sender, receiver, batch, num_graphs)
    loss = torch.mean((pred - energies) ** 2)
    loss.backward()
    optimizer.step()
print("loss", loss.item(), "bessel grad norm", model.radial_embedding.bessel_weights.grad.norm().item(),
      "moved", (model.radial_embedding.bessel_weights.detach() - w0).abs().max().item())
