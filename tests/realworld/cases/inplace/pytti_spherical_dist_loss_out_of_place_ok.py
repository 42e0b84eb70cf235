"""pytti's spherical_dist_loss after PR 225: x.sub(y).norm(dim=-1).div(2).arcsin().pow(2).mul(2), each step out of place, so the norm's saved output is intact and the prompt loss backpropagates into the image.

source: https://github.com/pytti-tools/pytti-core/pull/225
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import functional as F


class ReplaceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_forward, x_backward):
        ctx.shape = x_backward.shape
        return x_forward

    @staticmethod
    def backward(ctx, grad_in):
        return None, grad_in.sum_to_size(ctx.shape)


replace_grad = ReplaceGrad.apply


def spherical_dist_loss(x, y):
    x = F.normalize(x, dim=-1)
    y = F.normalize(y, dim=-1)
    return x.sub(y).norm(dim=-1).div(2).arcsin().pow(2).mul(2)


def mask_all(pos, size, emb, thresh=0.5):
    return torch.zeros_like(size[..., 0]).fill_(float("-inf")), 1


class Prompt(nn.Module):
    def __init__(self, embeds, weight, stop, mask=mask_all):
        super().__init__()
        self.register_buffer("embeds", embeds)
        self.weight, self.stop, self.mask = weight, stop, mask

    def forward(self, embed, position, size, offset=0.0):
        dists_raw = spherical_dist_loss(embed, self.embeds) + offset
        weight, stop = torch.as_tensor(float(self.weight)), torch.as_tensor(float(self.stop))
        mask_stops, mask_weights = self.mask(position, size, embed.detach())
        weight = torch.as_tensor(mask_weights) * weight
        sign_offset = weight.sign().clamp(max=0)
        dists = dists_raw * weight.sign()
        stops = torch.maximum(mask_stops + sign_offset, stop)
        dists = weight.abs() * replace_grad(dists, torch.maximum(dists, stops))
        return dists.mean(), dists_raw.mean()


torch.manual_seed(0)
image = nn.Parameter(torch.rand(1, 3, 16, 16))
embedder = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32))
for p in embedder.parameters():
    p.requires_grad_(False)
prompt = Prompt(torch.randn(1, 32), weight="1", stop="-inf")
optimizer = torch.optim.Adam([image], lr=0.05)
position, size = torch.zeros(1, 2), torch.ones(1, 2)
for step in range(5):
    loss, raw = prompt(embedder(image), position, size)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("prompt loss", raw.item())
