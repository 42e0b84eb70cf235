"""smirnoffee's evaluate_harmonic_angle_energy normalizes its bond vectors with vector_ab /= torch.norm(vector_ab, dim=1).unsqueeze(1): torch.norm saved vector_ab to compute its gradient, and the in-place divide overwrites it, so differentiating the angle energy with respect to the conformer (forces, minimization) fails.

source: https://github.com/openforcefield/smee/pull/9
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch


def evaluate_harmonic_angle_energy(
    conformer: torch.Tensor,
    atom_indices: torch.Tensor,
    parameters: torch.Tensor,
) -> torch.Tensor:
    """`1/2 * k * (theta - angle) ** 2` summed over the valence angles [kJ / mol]."""
    if len(atom_indices) == 0:
        return torch.zeros(1)

    vector_ab = conformer[atom_indices[:, 1]] - conformer[atom_indices[:, 0]]
    vector_ab /= torch.norm(vector_ab, dim=1).unsqueeze(1)  # ROOT

    vector_ac = conformer[atom_indices[:, 1]] - conformer[atom_indices[:, 2]]
    vector_ac /= torch.norm(vector_ac, dim=1).unsqueeze(1)

    angles = torch.rad2deg(torch.acos((vector_ab * vector_ac).sum(dim=1)))

    return (0.5 * parameters[:, 0] * (angles - parameters[:, 1]) ** 2).sum()


torch.manual_seed(0)
conformer = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.1, 0.0], [1.3, 1.0, 0.2], [2.0, -0.5, 0.3]])
atom_indices = torch.tensor([[0, 1, 2], [0, 1, 3], [2, 1, 3]])
parameters = torch.tensor([[0.05, 109.5], [0.05, 109.5], [0.05, 109.5]])

for step in range(10):
    conformer = conformer.detach().requires_grad_(True)
    energy = evaluate_harmonic_angle_energy(conformer, atom_indices, parameters)
    (gradient,) = torch.autograd.grad(energy, conformer)  # SYMPTOM
    conformer = conformer - 0.01 * gradient
print("angle energy", energy.item())
