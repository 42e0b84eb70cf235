"""DINOv2 depth notebook: the CenterPadding pre-hook runs under @torch.inference_mode(), so the depther cannot train.

source: https://github.com/facebookresearch/dinov2/issues/472
kind: bug
symptom: crash
verified: Inference tensors cannot be saved for backward
"""
import itertools
import math
from functools import partial
import torch
import torch.nn as nn
import torch.nn.functional as F


class CenterPadding(torch.nn.Module):
    def __init__(self, multiple):
        super().__init__()
        self.multiple = multiple

    def _get_pad(self, size):
        new_size = math.ceil(size / self.multiple) * self.multiple
        pad_size = new_size - size
        pad_size_left = pad_size // 2
        pad_size_right = pad_size - pad_size_left
        return pad_size_left, pad_size_right

    @torch.inference_mode()  # ROOT
    def forward(self, x):
        pads = list(itertools.chain.from_iterable(self._get_pad(m) for m in x.shape[:1:-1]))
        output = F.pad(x, pads)
        return output


class TinyDinoBackbone(nn.Module):
    patch_size = 4

    def __init__(self, embed_dim=8):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, embed_dim, self.patch_size, stride=self.patch_size)

    def get_intermediate_layers(self, x, n=1, reshape=True):
        return [self.patch_embed(x)] * n


class DepthEncoderDecoder(nn.Module):
    def __init__(self, embed_dim=8):
        super().__init__()
        self.backbone = nn.Identity()
        self.decode_head = nn.Conv2d(embed_dim, 1, 1)

    def forward(self, img):
        feats = self.backbone(img)
        return F.interpolate(self.decode_head(feats[-1]), size=img.shape[-2:])


def create_depther(backbone_model):
    depther = DepthEncoderDecoder()
    depther.backbone.forward = partial(backbone_model.get_intermediate_layers, n=1, reshape=True)
    depther.backbone.register_forward_pre_hook(lambda _, x: CenterPadding(backbone_model.patch_size)(x[0]))
    return depther


torch.manual_seed(0)
backbone_model = TinyDinoBackbone()
model = create_depther(backbone_model)
optimizer = torch.optim.AdamW(list(model.parameters()) + list(backbone_model.parameters()), lr=1e-4)
img, depth = torch.rand(2, 3, 30, 30), torch.rand(2, 1, 32, 32)
pred = model(img)  # SYMPTOM
loss = F.l1_loss(pred, depth)
loss.backward()
optimizer.step()
