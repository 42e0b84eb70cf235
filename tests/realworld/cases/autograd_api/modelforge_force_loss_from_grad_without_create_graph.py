"""modelforge's CalculateProperties._get_forces takes the predicted forces as -torch.autograd.grad(E.sum(), positions, create_graph=False): the force tensor is a constant for the model weights, so the force term of the training loss backpropagates nothing and the potential is trained on energies alone even when the loss weights forces.

source: https://github.com/choderalab/modelforge/pull/240
kind: bug
symptom: silent
verified: the per_atom_force loss has requires_grad False and the gradient the force term adds to the first layer's weight is 0.0, and over 30 steps the force MSE goes 0.068 -> 0.0163 (from the 0.001-weighted energy term alone); with create_graph=True (the fix, PR 240) the force term adds a gradient of norm 0.1319 and the force MSE goes 0.068 -> 0.0007
"""
from typing import Dict

import torch
from torch import nn


class NNP(nn.Module):  # a pairwise-distance network standing for the SchNet/PaiNN models the trainer wraps
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, positions):
        d = ((positions[:, :, None] - positions[:, None]) ** 2).sum(-1).add(1e-9).sqrt()
        iu = torch.triu_indices(positions.shape[1], positions.shape[1], 1)
        pair_d = d[:, iu[0], iu[1]].unsqueeze(-1)
        return {"per_molecule_energy": self.net(pair_d).sum(dim=(1, 2))}


class CalculateProperties(torch.nn.Module):
    def _get_forces(self, positions, F_true, energies: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        per_molecule_energy_predict = energies["per_molecule_energy_predict"]
        if not per_molecule_energy_predict.requires_grad:
            per_molecule_energy_predict.requires_grad = True
        if not positions.requires_grad:
            positions.requires_grad = True
        grad = torch.autograd.grad(
            per_molecule_energy_predict.sum(),
            positions,
            create_graph=False,  # ROOT
            retain_graph=True,
        )[0]
        per_atom_force_predict = -1 * grad  # Forces are the negative gradient of energy
        return {"per_atom_force_true": F_true, "per_atom_force_predict": per_atom_force_predict}

    def _get_energies(self, positions, E_true, model) -> Dict[str, torch.Tensor]:
        per_molecule_energy_predict = model.forward(positions)["per_molecule_energy"].unsqueeze(1)
        return {"per_molecule_energy_true": E_true, "per_molecule_energy_predict": per_molecule_energy_predict}

    def forward(self, positions, E_true, F_true, model) -> Dict[str, torch.Tensor]:
        energies = self._get_energies(positions, E_true, model)
        forces = self._get_forces(positions, F_true, energies)
        return {**energies, **forces}


def loss_terms(p):
    return {
        "per_molecule_energy": ((p["per_molecule_energy_predict"] - p["per_molecule_energy_true"]) ** 2).mean(),
        "per_atom_force": ((p["per_atom_force_predict"] - p["per_atom_force_true"]) ** 2).mean(),
    }


torch.manual_seed(0)
positions = torch.randn(8, 5, 3)
reference = NNP()
positions.requires_grad_(True)
E_ref = reference(positions)["per_molecule_energy"]
F_true = -torch.autograd.grad(E_ref.sum(), positions)[0].detach()
E_true = E_ref.detach().unsqueeze(1)
positions = positions.detach()

model = NNP()
calc = CalculateProperties()
weight = {"per_molecule_energy": 0.001, "per_atom_force": 0.999}
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    terms = loss_terms(calc(positions.clone().requires_grad_(True), E_true, F_true, model))
    if step == 0:
        print("force loss requires grad:", terms["per_atom_force"].requires_grad)
        w = model.net[0].weight
        g_energy = torch.autograd.grad(weight["per_molecule_energy"] * terms["per_molecule_energy"], w, retain_graph=True)[0]
        total = sum(weight[k] * terms[k] for k in terms)
        g_total = torch.autograd.grad(total, w, retain_graph=True)[0]
        print("gradient the force term adds to the first layer:", round((g_total - g_energy).norm().item(), 4))
        print("force MSE at step 0:", round(terms["per_atom_force"].item(), 4))
    loss = sum(weight[k] * terms[k] for k in terms)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("force MSE after 30 steps:", round(loss_terms(calc(positions.clone().requires_grad_(True), E_true, F_true, model))["per_atom_force"].item(), 4))
