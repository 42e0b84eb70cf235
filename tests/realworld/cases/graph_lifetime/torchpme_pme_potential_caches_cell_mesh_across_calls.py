"""torch-pme's PMEPotential caches the MeshInterpolator and the k-space filter mesh, both built from cell, and rebuilds them only if not torch.allclose(cell, self._cell_cache); a second call with the same cell reuses tensors that still belong to the first call's graph, which that call's backward freed, so the second backward fails.

source: https://github.com/lab-cosmo/torch-pme/issues/62
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch


def get_ns_mesh(cell, mesh_spacing):
    return torch.ceil(cell.detach().norm(dim=1) / mesh_spacing).long()


class MeshInterpolator:
    def __init__(self, cell, ns_mesh, interpolation_order):
        self.ns_mesh, self.interpolation_order = ns_mesh, interpolation_order
        self.inverse_cell = torch.linalg.inv(cell)
        self.k = torch.arange(1, int(ns_mesh.max()) + 1, dtype=cell.dtype)

    def compute_interpolation_weights(self, positions):
        fractional = positions @ self.inverse_cell
        self.weights = torch.cos(2 * torch.pi * fractional[:, :, None] * self.k).flatten(1)

    def points_to_mesh(self, particle_weights):
        return (particle_weights * self.weights).sum(0)

    def mesh_to_points(self, mesh_values):
        return (self.weights * mesh_values).sum(1, keepdim=True)


class KSpaceFilter:
    def update_mesh(self, cell, ns_mesh):
        k = torch.arange(1, int(ns_mesh.max()) + 1, dtype=cell.dtype)
        kvectors = torch.linalg.inv(cell).norm(dim=0)[:, None] * k
        self.kernel = (torch.exp(-kvectors.pow(2)) / kvectors.pow(2)).flatten()

    def compute(self, mesh_values):
        return mesh_values * self.kernel


class PMEPotential(torch.nn.Module):
    def __init__(self, mesh_spacing=1.0, interpolation_order=3):
        super().__init__()
        self.mesh_spacing, self.interpolation_order = mesh_spacing, interpolation_order
        self._cell_cache = -1 * torch.ones([3, 3])
        self._MI = MeshInterpolator(torch.eye(3), torch.ones(3, dtype=int), interpolation_order)
        self._KF = KSpaceFilter()

    def forward(self, positions, charges, cell):
        ivolume = torch.abs(cell.det()).pow(-1)
        if not torch.allclose(cell, self._cell_cache):  # ROOT
            self._cell_cache = cell.detach().clone()
            ns = get_ns_mesh(cell, self.mesh_spacing)
            self._MI = MeshInterpolator(cell, ns, interpolation_order=self.interpolation_order)
            self._KF.update_mesh(cell, ns)
        self._MI.compute_interpolation_weights(positions)
        rho_mesh = self._MI.points_to_mesh(particle_weights=charges)
        potential_mesh = self._KF.compute(rho_mesh)
        return self._MI.mesh_to_points(potential_mesh) * ivolume


torch.manual_seed(0)
calculator = PMEPotential()
for call in range(2):
    positions = (5 * torch.rand((20, 3))).requires_grad_()
    cell = (5 * torch.eye(3)).requires_grad_()
    charges = torch.rand((20, 1))
    output = calculator(positions, charges, cell).sum()
    output.backward()  # SYMPTOM
    print("call", call, "force norm", positions.grad.norm().item(), "cell grad", cell.grad.norm().item())
