"""open_clip after commit 38bcad6: `lock_text_transformer` builds the groups and unlocks the last `unlocked_groups` of them only when `unlocked_groups != 0`, so `--lock-text` with the default of 0 unlocked layers keeps the whole text tower frozen and out of the optimizer.

source: https://github.com/mlfoundations/open_clip/commit/38bcad6e926c8a09f13b6dc92526b9102a7b32cc
kind: lookalike
"""
from collections.abc import Sequence
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

torch.manual_seed(0)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, mlp_ratio=4.0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, int(d_model * mlp_ratio)), nn.GELU(),
                                 nn.Linear(int(d_model * mlp_ratio), d_model))

    def forward(self, x, attn_mask=None):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=attn_mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            x = r(x, attn_mask=attn_mask)
        return x


def lock_text_transformer(transformer, unlocked_groups: int = 0, freeze_layer_norm: bool = True):
    for param in transformer.parameters():
        param.requires_grad = False

    if unlocked_groups != 0:
        groups = [
            [transformer.token_embedding, transformer.positional_embedding],
            *transformer.transformer.resblocks[:-1],
            [transformer.transformer.resblocks[-1], transformer.ln_final],
            transformer.text_projection,
        ]

        def _unlock(x):
            if isinstance(x, Sequence):
                for g in x:
                    _unlock(g)
            else:
                if isinstance(x, torch.nn.Parameter):
                    x.requires_grad = True
                else:
                    for p in x.parameters():
                        p.requires_grad = True

        _unlock(groups[-unlocked_groups:])


class TextTransformer(nn.Module):
    def __init__(self, context_length=8, vocab_size=50, width=32, heads=4, layers=3, output_dim=16):
        super().__init__()
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.positional_embedding = nn.Parameter(torch.randn(context_length, width) * 0.01)
        self.transformer = Transformer(width, layers, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, output_dim) * width ** -0.5)
        self.register_buffer("attn_mask", torch.full((context_length, context_length), float("-inf")).triu_(1),
                             persistent=False)

    def lock(self, unlocked_layers: int = 0, freeze_layer_norm: bool = True):
        lock_text_transformer(self, unlocked_layers, freeze_layer_norm)

    def forward(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        x = self.ln_final(self.transformer(x, attn_mask=self.attn_mask))
        pooled = x[torch.arange(x.shape[0]), text.argmax(dim=-1)]
        return pooled @ self.text_projection


class CustomTextCLIP(nn.Module):
    def __init__(self, embed_dim=16):
        super().__init__()
        self.visual = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.GELU(), nn.Linear(64, embed_dim))
        self.text = TextTransformer(output_dim=embed_dim)
        self.logit_scale = nn.Parameter(torch.ones([]) * 2.659)

    def lock_text_tower(self, unlocked_layers: int = 0, freeze_layer_norm: bool = True):
        self.text.lock(unlocked_layers, freeze_layer_norm)

    def forward(self, image, text):
        return (F.normalize(self.visual(image), dim=-1), F.normalize(self.text(text), dim=-1),
                self.logit_scale.exp())


def clip_loss(image_features, text_features, logit_scale):
    logits = logit_scale * image_features @ text_features.T
    labels = torch.arange(logits.shape[0])
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


args = SimpleNamespace(lock_text=True, lock_text_unlocked_layers=0, lock_text_freeze_layer_norm=False,
                       lr=1e-3, wd=0.2)
model = CustomTextCLIP()
if args.lock_text:
    model.lock_text_tower(unlocked_layers=args.lock_text_unlocked_layers,
                          freeze_layer_norm=args.lock_text_freeze_layer_norm)

exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n  # noqa: E731
include = lambda n, p: not exclude(n, p)  # noqa: E731
named_parameters = list(model.named_parameters())
gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
rest_params = [p for n, p in named_parameters if include(n, p) and p.requires_grad]
optimizer = optim.AdamW([{"params": gain_or_bias_params, "weight_decay": 0.},
                         {"params": rest_params, "weight_decay": args.wd}], lr=args.lr)

text_before = {n: p.detach().clone() for n, p in model.text.named_parameters()}
for step in range(5):
    images, texts = torch.randn(8, 3, 8, 8), torch.randint(1, 50, (8, 8))
    loss = clip_loss(*model(images, texts))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

trainable = [n for n, p in model.text.named_parameters() if p.requires_grad]
moved = [n for n, p in model.text.named_parameters() if not torch.equal(p, text_before[n])]
print(f"text tower: {len(trainable)}/{len(text_before)} tensors require grad, {len(moved)} moved after 5 steps")
