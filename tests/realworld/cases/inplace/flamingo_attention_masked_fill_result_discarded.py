"""flamingo-pytorch MaskedCrossAttention: attn.masked_fill(mask, 0.) is out-of-place and its result is dropped, so text with no preceding media still attends to (and trains through) the media.

source: https://github.com/lucidrains/flamingo-pytorch/issues/10
kind: bug
symptom: silent
verified: the output rows of text tokens before the first media are not zero, and media.grad is non-zero through them
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum


class MaskedCrossAttention(nn.Module):
    def __init__(self, *, dim, dim_head=8, heads=2, only_attend_immediate_media=True):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        inner_dim = dim_head * heads
        self.norm = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)
        self.only_attend_immediate_media = only_attend_immediate_media

    def forward(self, x, media, media_locations=None):
        b, t, m = media.shape[:3]
        h = self.heads
        x = self.norm(x)
        q = self.to_q(x)
        media = media.reshape(b, t * m, -1)
        k, v = self.to_kv(media).chunk(2, dim=-1)
        q, k, v = (z.reshape(b, z.shape[1], h, -1).transpose(1, 2) for z in (q, k, v))
        q = q * self.scale
        sim = einsum('... i d, ... j d -> ... i j', q, k)
        if media_locations is not None:
            text_time = media_locations.cumsum(dim=-1)
            media_time = torch.arange(t) + 1
            text_to_media_mask = text_time[:, None, :, None] == media_time.repeat_interleave(m)[None, None, None, :]
            sim = sim.masked_fill(~text_to_media_mask, -torch.finfo(sim.dtype).max)
        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.softmax(dim=-1)
        if media_locations is not None and self.only_attend_immediate_media:
            text_without_media_mask = text_time == 0
            text_without_media_mask = text_without_media_mask[:, None, :, None]
            attn.masked_fill(text_without_media_mask, 0.)  # ROOT
        out = einsum('... i j, ... j d -> ... i d', attn, v)
        out = out.transpose(1, 2).reshape(b, out.shape[2], -1)
        return self.to_out(out)


torch.manual_seed(0)
attn_layer = MaskedCrossAttention(dim=16)
text = torch.randn(1, 6, 16)
media = torch.randn(1, 2, 3, 16, requires_grad=True)
media_locations = torch.tensor([[False, False, True, False, True, False]])
out = attn_layer(text, media, media_locations=media_locations)
out[:, :2].sum().backward()
