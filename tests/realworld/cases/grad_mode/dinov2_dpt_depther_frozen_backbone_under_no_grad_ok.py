"""DINOv2 DPT depther runs its frozen backbone under torch.no_grad(), so the DPT head trains on ordinary tensors.

source: https://github.com/facebookresearch/dinov2/issues/399
kind: lookalike
"""
from functools import partial

import torch
import torch.nn as nn


class DinoVisionTransformer(nn.Module):
    def __init__(self, embed_dim=32, patch_size=14):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.blocks = nn.ModuleList([nn.Conv2d(embed_dim, embed_dim, 1) for _ in range(4)])

    @torch.no_grad()
    def get_intermediate_layers(self, x, n=4, reshape=True):
        x = self.patch_embed(x)
        outputs = []
        for blk in self.blocks:
            x = torch.relu(blk(x))
            outputs.append(x)
        return outputs[-n:]


class DPTHead(nn.Module):
    def __init__(self, embed_dim=32):
        super().__init__()
        self.reassemble = nn.ModuleList([nn.Conv2d(embed_dim, 16, 1) for _ in range(4)])
        self.head = nn.Conv2d(16, 1, 3, padding=1)

    def forward(self, features):
        fused = sum(r(f) for r, f in zip(self.reassemble, features))
        return self.head(fused)


class DepthEncoderDecoder(nn.Module):
    def __init__(self, backbone, decode_head, depth_range=(0.01, 10)):
        super().__init__()
        self.backbone, self.decode_head, self.max_depth = backbone, decode_head, depth_range[1]

    def forward_train(self, img, depth_gt):
        depth = torch.sigmoid(self.decode_head(self.backbone(img))) * self.max_depth
        return nn.functional.l1_loss(depth, depth_gt)


torch.manual_seed(0)
backbone = DinoVisionTransformer()
backbone.forward = partial(backbone.get_intermediate_layers, n=4, reshape=True)
backbone.requires_grad_(False)
model = DepthEncoderDecoder(backbone, DPTHead(), depth_range=(0.01, 10))
optimizer = torch.optim.AdamW(model.decode_head.parameters(), lr=1e-4)
x, depth_gt = torch.ones(2, 3, 56, 56), torch.rand(2, 1, 4, 4) * 10
loss = model.forward_train(x, depth_gt)
optimizer.zero_grad()
loss.backward()
optimizer.step()
