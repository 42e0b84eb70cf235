"""threestudio's `Mesh._unwrap_uv` hands `self.v_pos.cpu().numpy()` to xatlas; in Fantasia3D's second (texture) stage without a fixed geometry, the mesh comes from the trainable tetrahedral SDF grid, so the first access of `mesh.v_tex` in the training step raises because `v_pos` requires grad.

source: https://github.com/threestudio-project/threestudio/pull/211
kind: bug
symptom: crash
verified: Can't call numpy() on Tensor that requires grad
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class Atlas:
    """Stands in for xatlas.Atlas (not installed): a planar projection with the same add_mesh/generate/get_mesh calls."""

    def add_mesh(self, positions, indices):
        assert isinstance(positions, np.ndarray) and isinstance(indices, np.ndarray)
        self.positions, self.indices = positions, indices

    def generate(self, chart_options=None, pack_options=None):
        p = self.positions[:, :2]
        self.uvs = ((p - p.min(0)) / (np.ptp(p, 0) + 1e-8)).astype(np.float32)

    def get_mesh(self, i):
        vmapping = np.arange(len(self.positions), dtype=np.uint32)
        return vmapping, self.indices.astype(np.uint32), self.uvs


class Mesh:
    def __init__(self, v_pos, t_pos_idx):
        self.v_pos = v_pos
        self.t_pos_idx = t_pos_idx
        self._v_tex = None
        self._t_tex_idx = None

    @property
    def v_tex(self):
        if self._v_tex is None:
            self._v_tex, self._t_tex_idx = self._unwrap_uv()
        return self._v_tex

    @property
    def t_tex_idx(self):
        if self._t_tex_idx is None:
            self._v_tex, self._t_tex_idx = self._unwrap_uv()
        return self._t_tex_idx

    def _unwrap_uv(self):
        atlas = Atlas()
        atlas.add_mesh(
            self.v_pos.cpu().numpy(),  # ROOT
            self.t_pos_idx.cpu().numpy(),
        )
        atlas.generate()
        vmapping, indices, uvs = atlas.get_mesh(0)
        uvs = torch.from_numpy(uvs).to(self.v_pos.device).float()
        indices = torch.from_numpy(indices.astype(np.int64)).to(self.v_pos.device).long()
        return uvs, indices


class TetrahedraSDFGrid(nn.Module):
    """Explicit geometry: per-vertex SDF values and deformations of a grid (the trainable geometry of stage 2)."""

    def __init__(self, resolution=6):
        super().__init__()
        r = torch.linspace(-1, 1, resolution)
        grid = torch.stack(torch.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3)
        self.register_buffer("grid_vertices", grid)
        self.sdf = nn.Parameter(grid.norm(dim=-1, keepdim=True) - 0.6)
        self.deformation = nn.Parameter(torch.zeros_like(grid))

    def isosurface(self):
        # reduced marching step: vertices near the zero level set, moved by the deformation and the SDF's sign
        near = (self.sdf.abs() < 0.35).squeeze(-1).nonzero().squeeze(-1)
        v = self.grid_vertices[near] + 0.1 * torch.tanh(self.deformation[near]) - 0.2 * self.sdf[near] * self.grid_vertices[near]
        faces = torch.stack([torch.arange(len(near) - 2), torch.arange(1, len(near) - 1), torch.arange(2, len(near))], -1)
        return Mesh(v_pos=v, t_pos_idx=faces)


class TextureMaterial(nn.Module):
    def __init__(self, size=16):
        super().__init__()
        self.texture = nn.Parameter(torch.rand(1, 3, size, size))

    def forward(self, mesh):
        uv = mesh.v_tex * 2.0 - 1.0
        rgb = F.grid_sample(self.texture, uv.view(1, -1, 1, 2), align_corners=False).view(3, -1).t()
        return rgb, mesh.v_pos


geometry = TetrahedraSDFGrid()  # stage 2 without `fix_geometry`: the SDF grid keeps training
material = TextureMaterial()
optimizer = torch.optim.Adam(list(geometry.parameters()) + list(material.parameters()), lr=1e-2)
target_rgb = torch.tensor([0.8, 0.3, 0.2])

for step in range(3):
    mesh = geometry.isosurface()
    rgb, v_pos = material(mesh)
    loss = ((rgb - target_rgb) ** 2).mean() + 1e-3 * (v_pos ** 2).sum(-1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
