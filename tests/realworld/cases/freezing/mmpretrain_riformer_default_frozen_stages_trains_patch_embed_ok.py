"""mmpretrain's RIFormer after PR #1573: `frozen_stages` defaults to -1 (nothing frozen) and `_freeze_stages` freezes the stem plus stages 0..frozen_stages only when asked, so a model trained with the default config trains its patch embedding.

source: https://github.com/open-mmlab/mmpretrain/pull/1573
kind: lookalike
"""
from typing import Sequence

import torch
import torch.nn as nn


class PatchEmbed(nn.Module):
    def __init__(self, patch_size=16, stride=16, padding=0, in_chans=3, embed_dim=768):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=stride, padding=padding)
        self.norm = nn.Identity()

    def forward(self, x):
        return self.norm(self.proj(x))


class RIFormerBlock(nn.Module):
    """Token-mixer-free block: norm -> MLP, with layer scale and a residual."""

    def __init__(self, dim, mlp_ratio=4, layer_scale_init_value=1e-5):
        super().__init__()
        self.norm = nn.GroupNorm(1, dim)
        self.mlp = nn.Sequential(nn.Conv2d(dim, dim * mlp_ratio, 1), nn.GELU(), nn.Conv2d(dim * mlp_ratio, dim, 1))
        self.layer_scale = nn.Parameter(layer_scale_init_value * torch.ones(dim))

    def forward(self, x):
        return x + self.layer_scale.view(1, -1, 1, 1) * self.mlp(self.norm(x))


class RIFormer(nn.Module):
    """RIFormer backbone.

    Args:
        frozen_stages (int): Stages to be frozen (all param fixed).
            Defaults to -1, which means not freezing any parameters.
    """

    def __init__(self,
                 layers=(1, 1),
                 embed_dims=(8, 16),
                 in_channels=3,
                 out_indices=-1,
                 frozen_stages=-1,
                 layer_scale_init_value=1e-2):
        super().__init__()
        self.patch_embed = PatchEmbed(patch_size=7, stride=4, padding=2, in_chans=in_channels, embed_dim=embed_dims[0])
        network = []
        for i in range(len(layers)):
            network.append(nn.Sequential(*[RIFormerBlock(embed_dims[i], layer_scale_init_value=layer_scale_init_value)
                                           for _ in range(layers[i])]))
            if i >= len(layers) - 1:
                break
            network.append(PatchEmbed(patch_size=3, stride=2, padding=1, in_chans=embed_dims[i], embed_dim=embed_dims[i + 1]))
        self.network = nn.ModuleList(network)

        if isinstance(out_indices, int):
            out_indices = [out_indices]
        assert isinstance(out_indices, Sequence)
        for i, index in enumerate(out_indices):
            if index < 0:
                out_indices[i] = len(self.network) + index
        self.out_indices = out_indices
        for i_layer in self.out_indices:
            self.add_module(f"norm{i_layer}", nn.GroupNorm(1, embed_dims[(i_layer + 1) // 2]))

        self.frozen_stages = frozen_stages
        self._freeze_stages()

    def forward(self, x):
        x = self.patch_embed(x)
        outs = []
        for idx, block in enumerate(self.network):
            x = block(x)
            if idx in self.out_indices:
                outs.append(getattr(self, f"norm{idx}")(x))
        return tuple(outs)

    def _freeze_stages(self):
        if self.frozen_stages >= 0:
            self.patch_embed.eval()
            for param in self.patch_embed.parameters():
                param.requires_grad = False

        for i in range(0, self.frozen_stages + 1):
            module = self.network[i]
            module.eval()
            for param in module.parameters():
                param.requires_grad = False
            if i in self.out_indices:
                norm_layer = getattr(self, f"norm{i}")
                norm_layer.eval()
                for param in norm_layer.parameters():
                    param.requires_grad = False

    def train(self, mode=True):
        super().train(mode)
        self._freeze_stages()
        return self


class ImageClassifier(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.backbone = RIFormer()
        self.head = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.head(self.backbone(x)[-1].mean(dim=(2, 3)))


torch.manual_seed(0)
model = ImageClassifier()
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
stem_before = model.backbone.patch_embed.proj.weight.detach().clone()
stage_before = model.backbone.network[0][0].mlp[0].weight.detach().clone()
images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 5, (8,))
for step in range(5):
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
print("patch_embed requires_grad:", model.backbone.patch_embed.proj.weight.requires_grad)
print(f"patch_embed moved by {(model.backbone.patch_embed.proj.weight - stem_before).abs().max().item():.2e}")
print(f"stage 0 moved by {(model.backbone.network[0][0].mlp[0].weight - stage_before).abs().max().item():.2e}")
