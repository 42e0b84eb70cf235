"""MobileSAM's TinyViT `Attention` overrides `train()` to cache the attention-bias table for inference, `self.ab = self.attention_biases[:, self.attention_bias_idxs]`, as a plain tensor attribute: it is not a registered buffer, so a later `model.to(...)` converts every parameter and buffer but not `ab`. Putting the image encoder in eval mode and then converting it to half precision (as for GPU inference) leaves `ab` in float32; the float32 bias promotes the half attention scores to float32, and `attn @ v` fails on the mixed dtypes.

source: https://github.com/ChaoningZhang/MobileSAM/commit/48f418b6e3008617593f69d906c13558049406e8
kind: bug
symptom: crash
verified: RuntimeError: expected m1 and m2 to have the same dtype, but got: float != c10::Half
"""
import itertools

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Attention(torch.nn.Module):
    def __init__(self, dim, key_dim, num_heads=8, attn_ratio=4, resolution=(14, 14)):
        super().__init__()
        assert isinstance(resolution, tuple) and len(resolution) == 2
        self.num_heads = num_heads
        self.scale = key_dim ** -0.5
        self.key_dim = key_dim
        self.nh_kd = nh_kd = key_dim * num_heads
        self.d = int(attn_ratio * key_dim)
        self.dh = int(attn_ratio * key_dim) * num_heads
        self.attn_ratio = attn_ratio
        h = self.dh + nh_kd * 2

        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, h)
        self.proj = nn.Linear(self.dh, dim)

        points = list(itertools.product(range(resolution[0]), range(resolution[1])))
        N = len(points)
        attention_offsets = {}
        idxs = []
        for p1 in points:
            for p2 in points:
                offset = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                if offset not in attention_offsets:
                    attention_offsets[offset] = len(attention_offsets)
                idxs.append(attention_offsets[offset])
        self.attention_biases = torch.nn.Parameter(torch.zeros(num_heads, len(attention_offsets)))
        self.register_buffer('attention_bias_idxs', torch.LongTensor(idxs).view(N, N), persistent=False)

    @torch.no_grad()
    def train(self, mode=True):
        super().train(mode)
        if mode and hasattr(self, 'ab'):
            del self.ab
        else:
            self.ab = self.attention_biases[:, self.attention_bias_idxs]  # ROOT

    def forward(self, x):  # x (B,N,C)
        B, N, _ = x.shape
        x = self.norm(x)
        qkv = self.qkv(x)
        q, k, v = qkv.view(B, N, self.num_heads, -1).split([self.key_dim, self.key_dim, self.d], dim=3)
        q = q.permute(0, 2, 1, 3)
        k = k.permute(0, 2, 1, 3)
        v = v.permute(0, 2, 1, 3)

        attn = (
            (q @ k.transpose(-2, -1)) * self.scale
            +
            (self.attention_biases[:, self.attention_bias_idxs]
             if self.training else self.ab)
        )
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.dh)
        return self.proj(x)


class TinyViTBlock(nn.Module):
    """Window attention plus MLP, reduced to one window covering the whole feature map."""

    def __init__(self, dim, num_heads, window_size=7):
        super().__init__()
        head_dim = dim // num_heads
        self.attn = Attention(dim, head_dim, num_heads, attn_ratio=1, resolution=(window_size, window_size))
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class ImageEncoder(nn.Module):
    def __init__(self, dim=32, depth=2, window_size=7):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.blocks = nn.ModuleList(TinyViTBlock(dim, num_heads=4, window_size=window_size) for _ in range(depth))

    def forward(self, image):
        x = self.patch_embed(image).flatten(2).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        return x


encoder = ImageEncoder()
encoder.eval()
encoder.to(torch.float16)  # the predictor moves the eval-mode encoder to the inference device and precision

image = torch.rand(1, 3, 28, 28, dtype=torch.float16)
with torch.no_grad():
    embedding = encoder(image)
print(f"image embedding: {tuple(embedding.shape)} {embedding.dtype}")
