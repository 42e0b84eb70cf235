"""Gaussian-splatting densification reads info["means2D"].grad, but means2D is a projected non-leaf tensor whose grad is never kept.

source: https://github.com/nerfstudio-project/gsplat/issues/390
kind: bug
symptom: silent
verified: info["means2D"].grad is None after every backward (torch warns about reading .grad of a non-leaf), so the densification accumulator stays 0.0; with retain_grad() it sums to 0.20
"""
import torch


def rasterization(means, scales, colors, viewmat, K, width=16, height=16):
    cam = (viewmat[:3, :3] @ means.T).T + viewmat[:3, 3]
    means2D = (K @ cam.T).T
    means2D = means2D[:, :2] / means2D[:, 2:3]
    ys, xs = torch.meshgrid(torch.arange(height).float(), torch.arange(width).float(), indexing="ij")
    pix = torch.stack([xs, ys], dim=-1).reshape(-1, 1, 2)
    w = torch.exp(-((pix - means2D) ** 2).sum(-1) / (2 * scales.exp() ** 2))
    renders = (w @ colors).reshape(height, width, 3)
    return renders, {"means2D": means2D}


torch.manual_seed(0)
N = 20
means = (torch.randn(N, 3) * 0.5 + torch.tensor([0.0, 0.0, 4.0])).requires_grad_()
scales = torch.zeros(N, requires_grad=True)
colors = torch.rand(N, 3, requires_grad=True)
viewmat, K = torch.eye(4), torch.tensor([[16.0, 0, 8], [0, 16.0, 8], [0, 0, 1]])
optimizer = torch.optim.Adam([means, scales, colors], lr=1e-2)
grad2d_accum = torch.zeros(N)
gt_image = torch.rand(16, 16, 3)
for step in range(3):
    renders, info = rasterization(means, scales, colors, viewmat, K)
    loss = (renders - gt_image).abs().mean()
    optimizer.zero_grad()
    loss.backward()
    grads = info["means2D"].grad  # ROOT
    if grads is not None:
        grad2d_accum += grads.norm(dim=-1)
    optimizer.step()
print(grad2d_accum.sum().item())
