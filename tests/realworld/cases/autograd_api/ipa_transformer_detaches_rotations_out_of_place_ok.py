"""invariant-point-attention's IPATransformer after the fix of issue 9 (release 0.2.2) stops the gradient through each layer's rotations with rotations = rotations.detach(), which is allowed on the view quaternion_to_matrix returns, so the transformer trains with the rotations out of the graph and the quaternion updates still feeding the translations.

source: https://github.com/lucidrains/invariant-point-attention/issues/9
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum


def quaternion_to_matrix(quaternions):  # pytorch3d.transforms.quaternion_to_matrix
    r, i, j, k = torch.unbind(quaternions, -1)
    two_s = 2.0 / (quaternions * quaternions).sum(-1)
    o = torch.stack((1 - two_s * (j * j + k * k), two_s * (i * j - k * r), two_s * (i * k + j * r),
                     two_s * (i * j + k * r), 1 - two_s * (i * i + k * k), two_s * (j * k - i * r),
                     two_s * (i * k - j * r), two_s * (j * k + i * r), 1 - two_s * (i * i + j * j)), -1)
    return o.reshape(quaternions.shape[:-1] + (3, 3))


def quaternion_multiply(a, b):  # pytorch3d.transforms.quaternion_multiply
    aw, ax, ay, az = torch.unbind(a, -1)
    bw, bx, by, bz = torch.unbind(b, -1)
    o = torch.stack((aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw), -1)
    return torch.where(o[..., 0:1] < 0, -o, o)


class InvariantPointAttention(nn.Module):  # one head, no pairwise representation, einops written out
    def __init__(self, dim, scalar_key_dim=8, point_key_dim=4):
        super().__init__()
        self.to_scalar_qkv = nn.Linear(dim, scalar_key_dim * 3, bias=False)
        self.to_point_qkv = nn.Linear(dim, point_key_dim * 3 * 3, bias=False)
        self.point_weights = nn.Parameter(torch.tensor(0.5413))
        self.to_out = nn.Linear(scalar_key_dim + point_key_dim * 4, dim)
        self.scale = (2 * scalar_key_dim) ** -0.5

    def forward(self, x, *, rotations, translations):
        q, k, v = self.to_scalar_qkv(x).chunk(3, dim=-1)
        qp, kp, vp = (einsum('b n d c, b n c r -> b n d r', t.unflatten(-1, (-1, 3)), rotations) + translations[:, :, None]
                      for t in self.to_point_qkv(x).chunk(3, dim=-1))
        point_dist = ((qp[:, :, None] - kp[:, None]) ** 2).sum(dim=(-1, -2))
        attn = (einsum('b i d, b j d -> b i j', q, k) * self.scale - 0.5 * F.softplus(self.point_weights) * point_dist).softmax(-1)
        results_points = einsum('b i j, b j d c -> b i d c', attn, vp) - translations[:, :, None]
        results_points = einsum('b n d c, b n c r -> b n d r', results_points, rotations.transpose(-1, -2))
        results = (einsum('b i j, b j d -> b i d', attn, v), results_points.flatten(-2), results_points.norm(dim=-1))
        return self.to_out(torch.cat(results, dim=-1))


class IPABlock(nn.Module):  # dropouts and the post-norm option left out
    def __init__(self, dim):
        super().__init__()
        self.attn_norm, self.attn = nn.LayerNorm(dim), InvariantPointAttention(dim)
        self.ff_norm, self.ff = nn.LayerNorm(dim), nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, x, **kwargs):
        x = self.attn(self.attn_norm(x), **kwargs) + x
        return self.ff(self.ff_norm(x)) + x


class IPATransformer(nn.Module):
    def __init__(self, *, dim, depth, num_tokens=None, detach_rotations=True):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.layers = nn.ModuleList([nn.ModuleList([IPABlock(dim), nn.Linear(dim, 6)]) for _ in range(depth)])
        self.detach_rotations = detach_rotations

    def forward(self, single_repr):
        x = self.token_emb(single_repr)
        b, n = single_repr.shape
        quaternions = torch.tensor([1., 0., 0., 0.]).repeat(b, n, 1)
        translations = torch.zeros((b, n, 3))
        for block, to_update in self.layers:
            rotations = quaternion_to_matrix(quaternions)
            if self.detach_rotations:
                rotations = rotations.detach()
            x = block(x, rotations=rotations, translations=translations)
            quaternion_update, translation_update = to_update(x).chunk(2, dim=-1)
            quaternion_update = F.pad(quaternion_update, (1, 0), value=1.)
            quaternion_update = quaternion_update / torch.linalg.norm(quaternion_update, dim=-1, keepdim=True)
            quaternions = quaternion_multiply(quaternions, quaternion_update)
            translations = translations + einsum('b n c, b n c r -> b n r', translation_update, rotations)
        return x, translations, quaternions


torch.manual_seed(0)
model = IPATransformer(dim=16, depth=2, num_tokens=20)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
seq, target_coords = torch.randint(0, 20, (2, 8)), torch.randn(2, 8, 3)  # stands for a denoising target
for step in range(3):
    x, translations, quaternions = model(seq)
    loss = F.mse_loss(translations, target_coords)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 4))
