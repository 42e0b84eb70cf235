"""bottleneck-transformer-pytorch's Attention after PR 14: the queries are scaled out of place with q = q * self.scale, so the views that chunk(3, dim=1) returns are never written to and the BottleBlock trains.

source: https://github.com/lucidrains/bottleneck-transformer-pytorch/pull/14
kind: lookalike
"""
import torch
from torch import nn, einsum


def to_heads(t, heads):  # rearrange(t, 'b (h d) x y -> b h (x y) d', h=heads)
    b, hd, x, y = t.shape
    return t.reshape(b, heads, hd // heads, x * y).permute(0, 1, 3, 2)


class AbsPosEmb(nn.Module):
    def __init__(self, fmap_size, dim_head):
        super().__init__()
        height, width = fmap_size
        scale = dim_head ** -0.5
        self.height = nn.Parameter(torch.randn(height, dim_head) * scale)
        self.width = nn.Parameter(torch.randn(width, dim_head) * scale)

    def forward(self, q):
        emb = self.height[:, None, :] + self.width[None, :, :]
        emb = emb.reshape(-1, emb.shape[-1])
        logits = einsum('b h i d, j d -> b h i j', q, emb)
        return logits


class Attention(nn.Module):
    def __init__(self, *, dim, fmap_size, heads=4, dim_head=128):
        super().__init__()
        self.heads = heads
        self.scale = dim_head ** -0.5
        inner_dim = heads * dim_head
        self.to_qkv = nn.Conv2d(dim, inner_dim * 3, 1, bias=False)
        self.pos_emb = AbsPosEmb(fmap_size, dim_head)

    def forward(self, fmap):
        heads, b, c, h, w = self.heads, *fmap.shape
        q, k, v = self.to_qkv(fmap).chunk(3, dim=1)
        q, k, v = map(lambda t: to_heads(t, heads), (q, k, v))

        q = q * self.scale

        sim = einsum('b h i d, b h j d -> b h i j', q, k)
        sim = sim + self.pos_emb(q)
        attn = sim.softmax(dim=-1)
        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        return out.permute(0, 1, 3, 2).reshape(b, -1, h, w)


class BottleBlock(nn.Module):  # the block without downsampling, dim == dim_out
    def __init__(self, *, dim, fmap_size, proj_factor=4, heads=4, dim_head=8, activation=nn.ReLU()):
        super().__init__()
        attn_dim_in = dim // proj_factor
        attn_dim_out = heads * dim_head
        self.net = nn.Sequential(
            nn.Conv2d(dim, attn_dim_in, 1, bias=False), nn.BatchNorm2d(attn_dim_in), activation,
            Attention(dim=attn_dim_in, fmap_size=fmap_size, heads=heads, dim_head=dim_head),
            nn.BatchNorm2d(attn_dim_out), activation,
            nn.Conv2d(attn_dim_out, dim, 1, bias=False), nn.BatchNorm2d(dim))
        self.activation = activation

    def forward(self, x):
        return self.activation(self.net(x) + x)


torch.manual_seed(0)
block = BottleBlock(dim=32, fmap_size=(8, 8))
opt = torch.optim.SGD(block.parameters(), lr=0.1)
x = torch.randn(2, 32, 8, 8)
for step in range(3):
    loss = block(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, "loss", round(loss.item(), 4))
