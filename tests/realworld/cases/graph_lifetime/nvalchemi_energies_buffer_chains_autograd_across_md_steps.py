"""nvalchemi-toolkit's Ewald and PME model wrappers keep a persistent per-system energy buffer (`self._energies_buf`) and reuse it on every forward with `zero_()` and `scatter_add_(0, batch_idx, per_atom_energies)`, returning a clone. The per-atom energies carry a graph (positions require grad so forces can be taken by autograd), so the in-place ops hang each step's graph on the module-owned buffer and link it to the previous step's through the `zero_` node: in a molecular-dynamics run the graph reachable from the energies, and the backward cost of every force call, grow with the step count; nothing errors.

source: https://github.com/NVIDIA/nvalchemi-toolkit/pull/82
kind: bug
symptom: silent
verified: the autograd graph reachable from the returned energies has 17 nodes at MD step 1, 850 at step 50 and 3400 at step 200, and the buffer still has a grad_fn after the run (True); in the look-alike it has 17 nodes at every step, the buffer has none (False), and the step-200 energies are the same (-3.3716, -0.0141)
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def count_nodes(fn):
    seen, stack = set(), [fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(nxt for nxt, _ in node.next_functions)
    return len(seen)


class EwaldModelWrapper(nn.Module):
    """Real-space screened Coulomb energy per atom, summed per system."""

    def __init__(self, num_systems, alpha=0.8):
        super().__init__()
        self.alpha = alpha
        self._energies_buf = torch.zeros(num_systems)

    def per_atom_energies(self, positions, charges, batch_idx):
        diff = positions[:, None, :] - positions[None, :, :]
        dist = (diff.pow(2).sum(-1) + 1e-9).sqrt()
        same = (batch_idx[:, None] == batch_idx[None, :]) & ~torch.eye(len(positions), dtype=torch.bool)
        pair = torch.where(same, charges[:, None] * charges[None, :] * torch.erfc(self.alpha * dist) / dist,
                           torch.zeros_like(dist))
        return 0.5 * pair.sum(1)

    def forward(self, positions, charges, batch_idx):
        per_atom = self.per_atom_energies(positions, charges, batch_idx)
        self._energies_buf.zero_()
        self._energies_buf.scatter_add_(0, batch_idx, per_atom)  # ROOT
        return self._energies_buf.clone()


def md_step(model, positions, velocities, charges, batch_idx, dt=0.01):
    positions = positions.detach().requires_grad_(True)
    energies = model(positions, charges, batch_idx)
    forces = -torch.autograd.grad(energies.sum(), positions)[0]
    velocities = velocities + dt * forces
    return (positions + dt * velocities).detach(), velocities, energies


num_systems, atoms_per_system = 2, 6
batch_idx = torch.arange(num_systems).repeat_interleave(atoms_per_system)
positions = torch.rand(num_systems * atoms_per_system, 3) * 4
charges = torch.tensor([1.0, -1.0]).repeat(num_systems * atoms_per_system // 2)
velocities = torch.zeros_like(positions)
model = EwaldModelWrapper(num_systems)

sizes = {}
for step in range(1, 201):
    positions, velocities, energies = md_step(model, positions, velocities, charges, batch_idx)
    if step in (1, 50, 200):
        sizes[step] = count_nodes(energies.grad_fn)
print("graph nodes reachable from the energies:", sizes)
print("buffer still has a grad_fn:", model._energies_buf.grad_fn is not None)
print("energies at step 200:", [round(e, 4) for e in energies.tolist()])
