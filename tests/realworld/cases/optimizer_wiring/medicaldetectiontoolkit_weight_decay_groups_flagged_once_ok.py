"""medicaldetectiontoolkit's `parse_params_for_optim` after its fix: the walk over `net.modules()` only flags the parameters of normalisation layers (`set_params_flag(module, ("no_wd", True))`), and the groups are then built from one pass over `net.parameters()`, so each parameter lands in exactly one group (checked by an assert on the parameter counts) and AdamW trains the network.

source: https://github.com/MIC-DKFZ/medicaldetectiontoolkit/commit/842a3c225eb1c3bd79b1ea100cb098658cc6bcdf
kind: lookalike
"""
from typing import Any, Iterable, Tuple

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


def set_params_flag(module: torch.nn.Module, flag: Tuple[str, Any], check_overwrite: bool = True):
    """Set an attribute for all module parameters."""
    for param in module.parameters():
        if check_overwrite:
            assert not hasattr(param, flag[0]), \
                "param {} already has attr {} (w/ val {})".format(param, flag[0], getattr(param, flag[0]))
        setattr(param, flag[0], flag[1])
    return module


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

    for module in net.modules():
        if isinstance(module, exclude_module_types):
            set_params_flag(module, ("no_wd", True))
    for param_name, param in net.named_parameters():
        if np.any([ename in param_name for ename in exclude_weight_names]):
            setattr(param, "no_wd", True)

    with_dec, no_dec = [], []
    for param in net.parameters():
        if hasattr(param, "no_wd") and param.no_wd == True:
            no_dec.append(param)
        else:
            with_dec.append(param)
    orig_ps = sum(p.numel() for p in net.parameters())
    with_ps = sum(p.numel() for p in with_dec)
    wo_ps = sum(p.numel() for p in no_dec)
    assert orig_ps == with_ps + wo_ps, "orig n parameters {} unequals sum of with wd {} and w/o wd {}.".format(
        orig_ps, with_ps, wo_ps)

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
