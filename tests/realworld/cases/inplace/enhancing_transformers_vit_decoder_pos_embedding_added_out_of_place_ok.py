"""ViTDecoder adds its position embedding out of place (the fix: token = token + self.de_pos_embedding), so two decoders can read the same quantized tokens.

source: https://github.com/thuanz123/enhancing-transformers/issues/11
kind: lookalike
verified: runs; both decoders and the encoder get gradients
"""
import torch
import torch.nn as nn


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x))


class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, mlp_dim):
        super().__init__()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.layers.append(nn.ModuleList([
                PreNorm(dim, lambda x, attn=attn: attn(x, x, x, need_weights=False)[0]),
                PreNorm(dim, nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))),
            ]))
            self.add_module(f"attn{_}", attn)

    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return x


class ViTDecoder(nn.Module):
    def __init__(self, num_patches=16, dim=32, depth=2, heads=4, mlp_dim=64, patch_dim=12):
        super().__init__()
        self.de_pos_embedding = nn.Parameter(torch.randn(1, num_patches, dim) * 0.02)
        self.transformer = Transformer(dim, depth, heads, mlp_dim)
        self.to_pixel = nn.Linear(dim, patch_dim)

    def forward(self, token):
        token = token + self.de_pos_embedding
        x = self.transformer(token)
        return self.to_pixel(x)


torch.manual_seed(0)
encoder = nn.Linear(12, 32)
decoder_a = ViTDecoder()
decoder_b = ViTDecoder()
patches = torch.randn(2, 16, 12)
quant = encoder(patches)
rec_a = decoder_a(quant)
rec_b = decoder_b(quant)
loss = (rec_a - patches).pow(2).mean() + (rec_b - patches).pow(2).mean()
loss.backward()
assert encoder.weight.grad is not None and decoder_b.de_pos_embedding.grad is not None
