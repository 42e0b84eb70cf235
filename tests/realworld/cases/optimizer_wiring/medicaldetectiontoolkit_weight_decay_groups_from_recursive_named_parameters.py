"""medicaldetectiontoolkit's `parse_params_for_optim` builds the weight-decay groups by walking `net.modules()` and, for every module that is not a normalisation layer, appending `module.named_parameters()`, which is recursive: the root network (and every container) adds all the parameters below it again, so the batch-norm parameters put in the no-decay group are also in the decay group, and `torch.optim.AdamW` refuses the groups.

source: https://github.com/MIC-DKFZ/medicaldetectiontoolkit/commit/842a3c225eb1c3bd79b1ea100cb098658cc6bcdf
kind: bug
symptom: crash
verified: ValueError: some parameters appear in more than one parameter group
"""
from typing import Iterable

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


def parse_params_for_optim(net: torch.nn.Module, weight_decay: float = 0., exclude_from_wd: Iterable = ("norm",)):
    """Format network parameters for the optimizer (weight-decay groups)."""
    norm_types = [torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d,
                  torch.nn.InstanceNorm1d, torch.nn.InstanceNorm2d, torch.nn.InstanceNorm3d,
                  torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.SyncBatchNorm, torch.nn.LocalResponseNorm]
    level_map = {"bias": "weight", "norm": "module"}
    type_map = {"norm": norm_types}

    exclude_from_wd = [str(name).lower() for name in exclude_from_wd]
    exclude_weight_names = [k for k, v in level_map.items() if k in exclude_from_wd and v == "weight"]
    exclude_module_types = tuple([type_ for k, v in level_map.items() if (k in exclude_from_wd and v == "module")
                                  for type_ in type_map[k]])

    with_dec, no_dec = [], []
    for module in net.modules():
        if isinstance(module, exclude_module_types):
            no_dec.extend(module.parameters())
        else:
            for param_name, param in module.named_parameters():  # ROOT
                if np.any([ename in param_name for ename in exclude_weight_names]):
                    no_dec.append(param)
                else:
                    with_dec.append(param)

    groups = [{'params': gr, 'weight_decay': wd} for gr, wd in [(no_dec, 0.), (with_dec, weight_decay)] if len(gr) > 0]
    return groups


class ConvBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1)
        self.norm = nn.BatchNorm3d(c_out)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.norm(self.conv(x)))


class RetinaUNetStandIn(nn.Module):
    """A small 3-D encoder with a segmentation head and a box-classifier head."""

    def __init__(self):
        super().__init__()
        self.fpn = nn.Sequential(ConvBlock(1, 8), ConvBlock(8, 16))
        self.seg_head = nn.Conv3d(16, 2, 1)
        self.cls_head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(16, 3))

    def forward(self, x):
        features = self.fpn(x)
        return self.seg_head(features), self.cls_head(features)


net = RetinaUNetStandIn()
optimizer = torch.optim.AdamW(parse_params_for_optim(net, weight_decay=1e-5, exclude_from_wd=("norm",)), lr=1e-4)

x = torch.randn(2, 1, 8, 16, 16)
seg_target = torch.randint(0, 2, (2, 8, 16, 16))
cls_target = torch.randint(0, 3, (2,))
for step in range(3):
    seg, cls = net(x)
    loss = nn.functional.cross_entropy(seg, seg_target) + nn.functional.cross_entropy(cls, cls_target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss after 3 steps: {loss.item():.3f}")
