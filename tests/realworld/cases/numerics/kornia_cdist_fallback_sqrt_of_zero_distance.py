"""kornia's _cdist (the distance matrix behind match_nn and the other descriptor matchers) falls back to a manual expand-and-norm for half-precision descriptors and ends with dm.clamp(min=0.0).sqrt(): where two descriptors coincide the squared distance is exactly zero, clamp passes the gradient through at its boundary and the backward of sqrt at zero is infinite, so the matched distance's gradient is NaN and a descriptor network trained on match_nn distances in bfloat16 gets NaN gradients everywhere.

source: https://github.com/kornia/kornia/pull/4233
kind: bug
symptom: silent
verified: with 6 of 8 bfloat16 descriptor pairs identical, all 64 entries of the descriptor network's weight gradient are NaN and after one SGD step all 64 weights are NaN; with the zero distances routed around sqrt (the fix) there are 0 NaN gradient entries and 0 NaN weights
"""
import torch
import torch.nn.functional as F


def _cdist(d1, d2):
    half = (torch.float16, torch.bfloat16)
    if d1.dtype not in half and d2.dtype not in half:  # the MPS check left out
        return torch.cdist(d1, d2)
    d1_sq = (d1**2).sum(dim=1, keepdim=True)
    d2_sq = (d2**2).sum(dim=1, keepdim=True)
    dm = d1_sq.repeat(1, d2.size(0)) + d2_sq.repeat(1, d1.size(0)).t() - 2.0 * d1 @ d2.t()
    dm = dm.clamp(min=0.0).sqrt()  # ROOT
    return dm


def match_nn(desc1, desc2, dm=None):  # the shape checks and the empty-input branch left out
    distance_matrix = _cdist(desc1, desc2) if dm is None else dm
    match_dists, idxs_in_2 = torch.min(distance_matrix, dim=1)
    idxs_in1 = torch.arange(0, idxs_in_2.size(0), device=idxs_in_2.device)
    matches_idxs = torch.cat([idxs_in1.view(-1, 1), idxs_in_2.view(-1, 1)], 1)
    return match_dists.view(-1, 1), matches_idxs.view(-1, 2)


torch.manual_seed(0)
descriptor = torch.nn.Linear(16, 4).to(torch.bfloat16)  # stands for a patch descriptor network run in bfloat16
optimizer = torch.optim.SGD(descriptor.parameters(), lr=0.1)
patches1 = torch.randn(8, 16, dtype=torch.bfloat16)
patches2 = patches1.clone()
patches2[6:] = torch.randn(2, 16, dtype=torch.bfloat16)  # two of the eight keypoints moved between the views
desc1 = F.normalize(descriptor(patches1), dim=1)
desc2 = F.normalize(descriptor(patches2), dim=1)
dists, idxs = match_nn(desc1, desc2)
loss = dists.float().mean()  # pull matched descriptors together
optimizer.zero_grad()
loss.backward()
grad = descriptor.weight.grad
print("NaN entries in the weight gradient:", torch.isnan(grad).sum().item(), "of", grad.numel())
optimizer.step()
print("NaN weights after one step:", torch.isnan(descriptor.weight).sum().item())
