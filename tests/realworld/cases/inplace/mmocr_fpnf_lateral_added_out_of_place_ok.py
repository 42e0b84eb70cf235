"""mmocr's FPNF neck with the PR's fix: the upsampled coarser level is added out of place, so the ReLU outputs of the lateral ConvModules stay intact.

source: https://github.com/open-mmlab/mmocr/pull/1018
kind: lookalike
verified: runs; the lateral convolutions get gradients
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvModule(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.activate = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.activate(self.bn(self.conv(x)))


class FPNF(nn.Module):
    def __init__(self, in_channels=(8, 16, 32, 64), out_channels=16, fusion_type='concat'):
        super().__init__()
        self.lateral_convs = nn.ModuleList([ConvModule(c, out_channels, 1) for c in in_channels])
        self.fpn_convs = nn.ModuleList([ConvModule(out_channels, out_channels, 3, padding=1)
                                        for _ in range(len(in_channels) - 1)])
        self.fusion_type = fusion_type
        self.output_convs = ConvModule(out_channels * len(in_channels), out_channels, 3, padding=1)

    def forward(self, inputs):
        laterals = [lateral_conv(inputs[i]) for i, lateral_conv in enumerate(self.lateral_convs)]
        used_backbone_levels = len(laterals)
        for i in range(used_backbone_levels - 1, 0, -1):
            prev_shape = laterals[i - 1].shape[2:]
            laterals[i - 1] = laterals[i - 1] + F.interpolate(laterals[i], size=prev_shape, mode='nearest')
            laterals[i - 1] = self.fpn_convs[i - 1](laterals[i - 1])
        bottom_shape = laterals[0].shape[2:]
        for i in range(1, used_backbone_levels):
            laterals[i] = F.interpolate(laterals[i], size=bottom_shape, mode='nearest')
        out = torch.cat(laterals, dim=1)
        return self.output_convs(out)


torch.manual_seed(0)
neck = FPNF()
head = nn.Conv2d(16, 7, 1)
inputs = [torch.randn(2, c, s, s) for c, s in zip((8, 16, 32, 64), (32, 16, 8, 4))]
gt = torch.rand(2, 7, 32, 32)
loss = F.binary_cross_entropy_with_logits(head(neck(inputs)), gt)
loss.backward()
assert neck.lateral_convs[0].conv.weight.grad is not None
