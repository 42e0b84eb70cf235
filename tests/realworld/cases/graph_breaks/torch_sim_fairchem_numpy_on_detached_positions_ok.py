"""torch-sim's `FairChemModel.forward` after its fix: positions, cell and atomic numbers are converted with `.detach().cpu().numpy()` before fairchem's predictor sees them, so the relaxation path, which marks `state.positions` as requiring grad, runs (forces come from the predictor, not from autograd).

source: https://github.com/TorchSim/torch-sim/issues/469
kind: lookalike
"""
from dataclasses import dataclass

import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)


@dataclass
class SimState:
    positions: torch.Tensor
    cell: torch.Tensor
    atomic_numbers: torch.Tensor


class ExternalPredictor:
    """Stand-in for fairchem's predict unit: a numpy Lennard-Jones energy and forces."""

    def predict(self, positions, cell, atomic_numbers, sigma=1.0, epsilon=1.0):
        diff = positions[:, None, :] - positions[None, :, :]
        diff -= cell.diagonal() * np.round(diff / cell.diagonal())
        r2 = (diff ** 2).sum(-1) + np.eye(len(positions))
        inv6 = (sigma ** 2 / r2) ** 3
        np.fill_diagonal(inv6, 0.0)
        energy = 2 * epsilon * (inv6 ** 2 - inv6).sum()
        coeff = 24 * epsilon * (2 * inv6 ** 2 - inv6) / r2
        forces = (coeff[:, :, None] * diff).sum(1)
        return {"energy": energy, "forces": forces}


class FairChemModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.predictor = ExternalPredictor()

    def forward(self, state):
        positions = state.positions.detach().cpu().numpy()
        cell = state.cell.detach().cpu().numpy()
        atomic_numbers = state.atomic_numbers.detach().cpu().numpy()
        out = self.predictor.predict(positions, cell, atomic_numbers)
        return {"energy": torch.tensor(out["energy"]), "forces": torch.from_numpy(out["forces"])}


def lbfgs_init(state, model):
    state.positions.requires_grad_(True)  # the optimizer tracks positions for autograd-based models
    return {"state": state, "out": model(state), "history": []}


def lbfgs_step(opt_state, model, step_size=0.01):
    state = opt_state["state"]
    with torch.no_grad():
        state.positions += step_size * opt_state["out"]["forces"].clamp(-1.0, 1.0)
    opt_state["out"] = model(state)
    return opt_state


def optimize(state, model, max_steps=20, fmax=0.05):
    opt_state = lbfgs_init(state, model)
    for _ in range(max_steps):
        if opt_state["out"]["forces"].norm(dim=1).max() < fmax:
            break
        opt_state = lbfgs_step(opt_state, model)
    return opt_state


def main():
    grid = torch.stack(torch.meshgrid(*(torch.arange(2.0),) * 3, indexing="ij"), -1).reshape(-1, 3)
    positions = (grid * 1.15 + 0.05 * torch.randn(8, 3)).double()
    state = SimState(positions, torch.eye(3, dtype=torch.float64) * 2.3, torch.full((8,), 18))
    model = FairChemModel()
    print("single point energy:", round(model(state)["energy"].item(), 4))
    result = optimize(state, model)
    print("relaxed energy:", round(result["out"]["energy"].item(), 4))


if __name__ == "__main__":
    main()
