"""lucidrains' NystromAttention after PR 7 scales the queries out of place, q = q * self.scale, so the views that chunk and the head rearrangement return are never written and the attention trains.

source: https://github.com/lucidrains/nystrom-attention/pull/7
kind: lookalike
"""
from math import ceil

import torch
from torch import nn, einsum
import torch.nn.functional as F


def rearrange_heads(t, h):  # einops.rearrange(t, 'b n (h d) -> b h n d', h=h), as views
    b, n, hd = t.shape
    return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)


def reduce_landmarks(t, l):  # einops.reduce(t, '... (n l) d -> ... n d', 'sum', l=l)
    return t.reshape(*t.shape[:-2], t.shape[-2] // l, l, t.shape[-1]).sum(-2)


def moore_penrose_iter_pinv(x, iters=6):
    abs_x = torch.abs(x)
    col = abs_x.sum(dim=-1)
    row = abs_x.sum(dim=-2)
    z = x.transpose(-1, -2) / (torch.max(col) * torch.max(row))
    I = torch.eye(x.shape[-1], device=x.device)[None]
    for _ in range(iters):
        xz = x @ z
        z = 0.25 * z @ (13 * I - (xz @ (15 * I - (xz @ (7 * I - xz)))))
    return z


class NystromAttention(nn.Module):  # the mask and the padding branches left out
    def __init__(self, dim, dim_head=64, heads=8, num_landmarks=256, pinv_iterations=6, residual=True,
                 residual_conv_kernel=33, eps=1e-8, dropout=0.):
        super().__init__()
        self.eps = eps
        inner_dim = heads * dim_head
        self.num_landmarks = num_landmarks
        self.pinv_iterations = pinv_iterations
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, dim), nn.Dropout(dropout))
        self.residual = residual
        if residual:
            kernel_size = residual_conv_kernel
            padding = residual_conv_kernel // 2
            self.res_conv = nn.Conv2d(heads, heads, (kernel_size, 1), padding=(padding, 0), groups=heads, bias=False)

    def forward(self, x):
        b, n, _, h, m, iters = *x.shape, self.heads, self.num_landmarks, self.pinv_iterations
        # derive query, keys, values
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange_heads(t, h), (q, k, v))
        q = q * self.scale
        # generate landmarks by sum reduction, and then calculate mean
        l = ceil(n / m)
        q_landmarks = reduce_landmarks(q, l) / l
        k_landmarks = reduce_landmarks(k, l) / l
        # similarities
        einops_eq = '... i d, ... j d -> ... i j'
        sim1 = einsum(einops_eq, q, k_landmarks)
        sim2 = einsum(einops_eq, q_landmarks, k_landmarks)
        sim3 = einsum(einops_eq, q_landmarks, k)
        attn1, attn2, attn3 = map(lambda t: t.softmax(dim=-1), (sim1, sim2, sim3))
        attn2_inv = moore_penrose_iter_pinv(attn2, iters)
        out = (attn1 @ attn2_inv) @ (attn3 @ v)
        if self.residual:
            out = out + self.res_conv(v)
        out = out.permute(0, 2, 1, 3).reshape(b, n, -1)
        return self.to_out(out)


torch.manual_seed(0)
attn = NystromAttention(dim=16, dim_head=8, heads=2, num_landmarks=4, residual_conv_kernel=5)
head = nn.Linear(16, 3)
optimizer = torch.optim.Adam(list(attn.parameters()) + list(head.parameters()), lr=1e-3)
x, y = torch.randn(4, 16, 16), torch.randint(0, 3, (4,))
logits = head(attn(x).mean(1))
loss = F.cross_entropy(logits, y)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item())
