"""matgl's PyG CHGNet.forward after PR 835: the three-body line graph is built with gradient tracking, so lg_bond_vec and lg_bond_dist stay connected to the atom positions and the forces include the three-body (angle) terms.

source: https://github.com/materialyzeai/matgl/pull/835
kind: lookalike
"""
import torch
from torch import nn


def create_directed_line_graph(edge_index, pbc_offset, bond_vec, bond_dist, threebody_cutoff):
    device = edge_index.device
    valid = bond_dist <= threebody_cutoff
    edge_ids = valid.nonzero(as_tuple=False).squeeze(1)
    src_indices = edge_index[0]
    dst_indices = edge_index[1]
    num_lg_nodes = edge_ids.numel()
    local_ids = torch.arange(num_lg_nodes, dtype=torch.long, device=device)
    v_src = src_indices[edge_ids]
    v_dst = dst_indices[edge_ids]
    v_images = pbc_offset[edge_ids]
    is_self_edge = v_src == v_dst
    shared_src = v_src.unsqueeze(1) == v_src.unsqueeze(0)
    incoming_to_ca = v_dst.unsqueeze(1) == v_src.unsqueeze(0)
    is_backtrack = incoming_to_ca & (v_src.unsqueeze(1) == v_dst.unsqueeze(0)) & torch.all(-v_images.unsqueeze(1) == v_images.unsqueeze(0), dim=2)
    include_mask = incoming_to_ca & (shared_src | ~is_backtrack)
    include_mask = torch.where(is_self_edge.unsqueeze(0), incoming_to_ca, include_mask)
    include_mask.fill_diagonal_(False)
    lg_src, lg_dst = include_mask.nonzero(as_tuple=True)
    lg_edge_index = torch.stack([lg_src, lg_dst], dim=0)
    lg_bond_vec = bond_vec[edge_ids]
    lg_bond_dist = bond_dist[edge_ids]
    lg_pbc_offset = pbc_offset[edge_ids]
    lg_src_bond_sign = torch.ones((num_lg_nodes, 1), dtype=bond_vec.dtype, device=device)
    ns_local_ids = local_ids[~is_self_edge]
    if ns_local_ids.numel() > 0:
        lg_src_bond_sign[ns_local_ids] = -1.0
    return lg_edge_index, lg_bond_vec, lg_bond_dist, lg_pbc_offset, lg_src_bond_sign


def compute_theta(bond_vec, src_bond_sign, lg_src, lg_dst, directed=True, eps=1e-7):
    vec1 = bond_vec[lg_src] * src_bond_sign[lg_src] if directed else bond_vec[lg_src]
    vec2 = bond_vec[lg_dst]
    cos_theta = (vec1 * vec2).sum(dim=1) / (torch.norm(vec1, dim=1) * torch.norm(vec2, dim=1)).clamp(min=eps)
    return cos_theta.clamp(-1 + eps, 1 - eps)


class CHGNet(nn.Module):  # energy = two-body term on bond lengths + three-body term on bond angles
    def __init__(self, three_body_cutoff=3.0):
        super().__init__()
        self.three_body_cutoff = three_body_cutoff
        self.bond_mlp = nn.Sequential(nn.Linear(1, 16), nn.SiLU(), nn.Linear(16, 1))
        self.angle_mlp = nn.Sequential(nn.Linear(1, 16), nn.SiLU(), nn.Linear(16, 1))

    def forward(self, pos, edge_index, pbc_offset):
        bond_vec = pos[edge_index[1]] - pos[edge_index[0]] + pbc_offset
        bond_dist = torch.norm(bond_vec, dim=1)
        (lg_edge_index, lg_bond_vec, lg_bond_dist, _lg_pbc_offset, lg_src_bond_sign) = create_directed_line_graph(
            edge_index, pbc_offset, bond_vec, bond_dist, self.three_body_cutoff)
        cos_theta = compute_theta(lg_bond_vec, lg_src_bond_sign, lg_edge_index[0], lg_edge_index[1])
        return self.bond_mlp(bond_dist[:, None]).sum() + self.angle_mlp(cos_theta[:, None]).sum()


torch.manual_seed(0)
model = CHGNet().double()
pos = torch.randn(5, 3, dtype=torch.float64) * 1.2
src, dst = torch.meshgrid(torch.arange(5), torch.arange(5), indexing="ij")
keep = src != dst
edge_index = torch.stack([src[keep], dst[keep]])
pbc_offset = torch.zeros(edge_index.shape[1], 3, dtype=torch.float64)
pos.requires_grad_(True)
forces = -torch.autograd.grad(model(pos, edge_index, pbc_offset), pos)[0]
fd = torch.zeros_like(forces)
with torch.no_grad():
    for a in range(5):
        for k in range(3):
            step = torch.zeros_like(pos)
            step[a, k] = 1e-5
            fd[a, k] = -(model(pos + step, edge_index, pbc_offset) - model(pos - step, edge_index, pbc_offset)) / 2e-5
print("max |autograd forces - finite-difference forces|: %.4g" % float((forces - fd).abs().max()))
