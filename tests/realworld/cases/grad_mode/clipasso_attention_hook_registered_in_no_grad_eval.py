"""CLIPasso with train_with_clip: the relevance-map CLIP registers a gradient hook on every attention map in forward, and the eval step computes the CLIP loss under torch.no_grad(), where the attention maps do not require grad.

source: https://github.com/yael-vinker/CLIPasso/issues/21
kind: bug
symptom: crash
verified: cannot register a hook on a tensor that doesn't require gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn_probs = None
        self.attn_grad = None

    def set_attn_grad(self, grad):
        self.attn_grad = grad

    def attention(self, x):
        b, n, d = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
        attn_probs = torch.softmax(q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5), dim=-1)
        self.attn_probs = attn_probs
        attn_probs.register_hook(self.set_attn_grad)  # ROOT
        out = (attn_probs @ v).transpose(1, 2).reshape(b, n, d)
        return self.out_proj(out)

    def forward(self, x):
        return x + self.attention(self.ln_1(x))


class VisionTransformer(nn.Module):
    def __init__(self, width=16, layers=2, heads=2):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=4, stride=4, bias=False)
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        return self.resblocks(x).mean(1)


class CLIPLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = VisionTransformer().requires_grad_(False)

    def forward(self, sketches, targets):
        return 1 - F.cosine_similarity(self.visual(sketches), self.visual(targets)).mean()


torch.manual_seed(0)
clip_loss = CLIPLoss()
target = torch.rand(1, 3, 16, 16)
points_vars = torch.rand(1, 3, 16, 16, requires_grad=True)  # the rasterized strokes stand-in
optimizer = torch.optim.Adam([points_vars], lr=1.0)
for epoch in range(3):
    optimizer.zero_grad()
    loss = clip_loss(points_vars, target)
    loss.backward()
    optimizer.step()
    if epoch % 2 == 0:
        with torch.no_grad():
            loss_eval = clip_loss(points_vars, target)  # SYMPTOM
