"""A learnable-translation module for kornia's affine warp stacks its two translation Parameters once, self.translations = torch.stack([self.x_translation, self.y_translation], 1), in __init__: every forward reuses that one stacked tensor, so the optimizer moves x_translation/y_translation (their gradients still flow through the old stack node) but the warp keeps using the initial values and the loss never changes.

source: https://github.com/kornia/kornia/issues/682
kind: bug
symptom: silent
verified: over 40 Adam steps x_translation moves 0.0 -> 0.4 while the loss stays at 8.1328 (first 8.1328, last 8.1328); stacking in forward (the reporter's fix) takes the loss 8.1328 -> 0.1652
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def get_rotation_matrix2d(center, angle, scale):
    rad = angle * math.pi / 180
    alpha, beta = scale * torch.cos(rad), scale * torch.sin(rad)
    x, y = center[..., 0], center[..., 1]
    row0 = torch.stack([alpha, beta, (1 - alpha) * x - beta * y], -1)
    row1 = torch.stack([-beta, alpha, beta * x + (1 - alpha) * y], -1)
    return torch.stack([row0, row1], 1)


def warp_affine(src, M, dsize):
    h, w = dsize
    norm = torch.tensor([[2 / w, 0, -1], [0, 2 / h, -1], [0, 0, 1]], dtype=src.dtype)
    full = torch.cat([M, torch.tensor([[[0, 0, 1.0]]]).expand(M.shape[0], 1, 3)], 1)
    theta = (norm @ torch.inverse(full) @ torch.inverse(norm))[:, :2]
    grid = F.affine_grid(theta, list(src.shape), align_corners=False)
    return F.grid_sample(src, grid, align_corners=False)


class DTranslation(nn.Module):
    def __init__(self, x_translation, y_translation):
        super().__init__()
        self.x_translation = nn.Parameter(x_translation)
        self.y_translation = nn.Parameter(y_translation)
        self.translations = torch.stack([self.x_translation, self.y_translation], 1)  # ROOT
        self.angle = torch.tensor([0.0])

    def forward(self, input):
        _, _, h, w = input.shape
        angle = self.angle.repeat(input.shape[0])
        translations = self.translations.repeat([input.shape[0], 1])
        translations[:, 0] *= h
        translations[:, 1] *= w
        center = torch.ones(2)
        center[..., 0] = input.shape[3] / 2
        center[..., 1] = input.shape[2] / 2
        center = center.repeat(input.shape[0], 1)
        scale = torch.ones(input.shape[0])
        M = get_rotation_matrix2d(center, -angle, scale)
        M[..., 2] += translations
        return warp_affine(input, M, dsize=(h, w))


torch.manual_seed(0)
yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
images = torch.exp(-((xx - 16) ** 2 + (yy - 16) ** 2) / 30).expand(4, 1, 32, 32)
target = torch.exp(-((xx - 16 - 0.3 * 32) ** 2 + (yy - 16 + 0.2 * 32) ** 2) / 30).expand(4, 1, 32, 32)
model = DTranslation(torch.tensor([0.0]), torch.tensor([0.0]))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for _ in range(40):
    loss = F.mse_loss(model(images), target) * 100
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print("x_translation", model.x_translation.item(), "loss", losses[0], "->", losses[-1])
