"""A deep_cage-style deform_with_MVC that detaches the mean-value-coordinate weights only where they blend the deformed cage and returns the attached weights: the deformation does not backpropagate through the coordinates, while the MVC regularizer on the returned weights still trains the cage predictor (mvc_weight changes the training).

source: https://github.com/yifita/deep_cage/issues/16
kind: lookalike
"""
import torch
import torch.nn as nn


def mean_value_coordinates_3D(query, cage, cage_face, verbose=False):
    # stand-in for the MVC formula: normalized inverse distances from each query point to the cage vertices
    dist = torch.cdist(query, cage)  # (B,Q,C)
    weights_unnormed = 1.0 / (dist + 1e-3)
    weights = weights_unnormed / weights_unnormed.sum(dim=-1, keepdim=True)
    return weights, weights_unnormed


def deform_with_MVC(cage, cage_deformed, cage_face, query, verbose=False):
    weights, weights_unnormed = mean_value_coordinates_3D(query, cage, cage_face, verbose=True)
    deformed = torch.sum(weights.detach().unsqueeze(-1) * cage_deformed.unsqueeze(1), dim=2)
    if verbose:
        return deformed, weights, weights_unnormed
    return deformed


class CageNet(nn.Module):
    def __init__(self, n_cage=12, dim=32):
        super().__init__()
        self.n_cage = n_cage
        self.encoder = nn.Sequential(nn.Linear(3, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.cage_head = nn.Linear(dim, n_cage * 3)
        self.deform_head = nn.Linear(2 * dim, n_cage * 3)
        self.template = nn.Parameter(torch.randn(n_cage, 3) * 0.5, requires_grad=False)

    def forward(self, source_shape, target_shape, cage_face):
        fs = self.encoder(source_shape).max(dim=1)[0]
        ft = self.encoder(target_shape).max(dim=1)[0]
        cage = self.template + 0.1 * self.cage_head(fs).view(-1, self.n_cage, 3)
        new_cage = cage + 0.1 * self.deform_head(torch.cat([fs, ft], -1)).view(-1, self.n_cage, 3)
        deformed, weight, _ = deform_with_MVC(cage, new_cage, cage_face, source_shape, verbose=True)
        return {"cage": cage, "new_cage": new_cage, "deformed": deformed, "weight": weight}


def mvc_reg_loss(weights):
    # penalize negative and very peaked coordinates
    return (torch.relu(-weights).sum(-1) + weights.pow(2).sum(-1)).mean()


def train(mvc_weight, steps=8):
    torch.manual_seed(0)
    net = CageNet()
    optimizer = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-3)
    cage_face = torch.zeros(20, 3, dtype=torch.long)
    for step in range(steps):
        source_shape, target_shape = torch.randn(2, 64, 3), torch.randn(2, 64, 3)
        all_outputs = net(source_shape, target_shape, cage_face)
        loss = {"CD": (all_outputs["deformed"] - target_shape).pow(2).mean()}
        loss["WREG"] = mvc_reg_loss(all_outputs["weight"]) * mvc_weight
        total = sum(loss.values())
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
    return net, loss["WREG"]


net_reg, wreg = train(mvc_weight=10.0)
net_plain, _ = train(mvc_weight=0.0)
print("WREG", wreg.item(), "requires_grad", wreg.requires_grad)
print("cage head apart", (net_reg.cage_head.weight - net_plain.cage_head.weight).abs().max().item())
