"""pytorch3d's cot_laplacian after commit 3b5ab51 ("Fix backprop through cot_laplacian"): the area clamp, the division of the cotangents and the symmetrization `L = L + L.t()` are out of place, so a loss that backpropagates through the cotangent Laplacian reaches the mesh vertices.

source: https://github.com/facebookresearch/pytorch3d/commit/3b5ab51de55aa47f6ca691dda19cf5907f168a4c
kind: lookalike
"""
from typing import Tuple

import torch


def cot_laplacian(verts: torch.Tensor, faces: torch.Tensor, eps: float = 1e-12) -> Tuple[torch.Tensor, torch.Tensor]:
    V, F = verts.shape[0], faces.shape[0]

    face_verts = verts[faces]
    v0, v1, v2 = face_verts[:, 0], face_verts[:, 1], face_verts[:, 2]

    # Side lengths of each triangle, of shape (sum(F_n),)
    A = (v1 - v2).norm(dim=1)
    B = (v0 - v2).norm(dim=1)
    C = (v0 - v1).norm(dim=1)

    # Area of each triangle (with Heron's formula); shape is (sum(F_n),)
    s = 0.5 * (A + B + C)
    area = (s * (s - A) * (s - B) * (s - C)).clamp(min=eps).sqrt()

    # Compute cotangents of angles, of shape (sum(F_n), 3)
    A2, B2, C2 = A * A, B * B, C * C
    cota = (B2 + C2 - A2) / area
    cotb = (A2 + C2 - B2) / area
    cotc = (A2 + B2 - C2) / area
    cot = torch.stack([cota, cotb, cotc], dim=1)
    cot = cot / 4.0

    # Construct a sparse matrix by basically doing:
    # L[v1, v2] = cota, L[v2, v0] = cotb, L[v0, v1] = cotc
    ii = faces[:, [1, 2, 0]]
    jj = faces[:, [2, 0, 1]]
    idx = torch.stack([ii, jj], dim=0).view(2, F * 3)
    L = torch.sparse_coo_tensor(idx, cot.view(-1), (V, V), dtype=torch.float32)

    # Make it symmetric
    L = L + L.t()

    # For each vertex, compute the sum of areas for triangles containing it.
    idx = faces.view(-1)
    inv_areas = torch.zeros(V, dtype=torch.float32, device=verts.device)
    val = torch.stack([area] * 3, dim=1).view(-1)
    inv_areas.scatter_add_(0, idx, val)
    idx = inv_areas > 0
    inv_areas[idx] = torch.reciprocal(inv_areas[idx])
    inv_areas = inv_areas.view(-1, 1)

    return L, inv_areas


torch.manual_seed(0)
verts = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.5, 0.5, 0.8]])
faces = torch.tensor([[0, 1, 4], [1, 3, 4], [3, 2, 4], [2, 0, 4]])
target = verts + 0.1 * torch.randn_like(verts)
deform_verts = torch.zeros_like(verts, requires_grad=True)
optimizer = torch.optim.SGD([deform_verts], lr=0.05)
for step in range(3):
    new_verts = verts + deform_verts
    L, inv_areas = cot_laplacian(new_verts, faces)
    Ld = L.to_dense()  # cotangent Dirichlet energy trace(V^T (D - L) V) of the deformed mesh plus a data term
    loss_smooth = ((Ld.sum(1, keepdim=True) * new_verts - Ld @ new_verts) * new_verts).sum()
    loss = ((new_verts - target) ** 2).sum() + 0.01 * loss_smooth
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 4))
