"""mmdetection PAFPN with act_cfg=dict(type='ReLU'): the bottom-up path adds `inter_outs[i + 1] += self.downsample_convs[i](inter_outs[i])` into the output of an fpn_conv whose in-place ReLU saved it for backward.

source: https://github.com/open-mmlab/mmdetection/pull/9450
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvModule(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, act_cfg=None):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding)
        self.activate = nn.ReLU(inplace=True) if act_cfg is not None else None

    def forward(self, x):
        x = self.conv(x)
        return self.activate(x) if self.activate is not None else x


class PAFPN(nn.Module):
    def __init__(self, in_channels, out_channels, act_cfg=None):
        super().__init__()
        self.lateral_convs = nn.ModuleList([ConvModule(c, out_channels, 1, act_cfg=act_cfg) for c in in_channels])
        self.fpn_convs = nn.ModuleList([ConvModule(out_channels, out_channels, 3, padding=1, act_cfg=act_cfg)
                                        for _ in in_channels])
        self.downsample_convs = nn.ModuleList([ConvModule(out_channels, out_channels, 3, stride=2, padding=1,
                                                          act_cfg=act_cfg) for _ in in_channels[1:]])
        self.pafpn_convs = nn.ModuleList([ConvModule(out_channels, out_channels, 3, padding=1, act_cfg=act_cfg)
                                          for _ in in_channels[1:]])

    def forward(self, inputs):
        laterals = [lateral_conv(inputs[i]) for i, lateral_conv in enumerate(self.lateral_convs)]
        used_backbone_levels = len(laterals)
        for i in range(used_backbone_levels - 1, 0, -1):
            prev_shape = laterals[i - 1].shape[2:]
            laterals[i - 1] = laterals[i - 1] + F.interpolate(laterals[i], size=prev_shape, mode='nearest')
        inter_outs = [self.fpn_convs[i](laterals[i]) for i in range(used_backbone_levels)]
        for i in range(0, used_backbone_levels - 1):
            inter_outs[i + 1] += self.downsample_convs[i](inter_outs[i])  # ROOT
        outs = [inter_outs[0]]
        outs.extend([self.pafpn_convs[i - 1](inter_outs[i]) for i in range(1, used_backbone_levels)])
        return tuple(outs)


torch.manual_seed(0)
in_channels = [8, 16, 32]
neck = PAFPN(in_channels, 16, act_cfg=dict(type='ReLU'))
feats = [torch.randn(2, c, 32 // 2 ** i, 32 // 2 ** i) for i, c in enumerate(in_channels)]
outs = neck(feats)
loss = sum(o.mean() for o in outs)
loss.backward()  # SYMPTOM
