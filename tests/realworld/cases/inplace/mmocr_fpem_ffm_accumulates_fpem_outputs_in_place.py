"""MMOCR's FPEM_FFM neck (PANet) sums the outputs of its FPEM blocks with c2_ffm += c2: after the first block c2_ffm is that block's c2, the ReLU output of a SeparableConv2d, which ReLU's backward needs, so the in-place sum changes a tensor saved for the backward and training fails at loss.backward().

source: https://github.com/open-mmlab/mmocr/pull/884
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn.functional as F
from torch import nn


class FPEM(nn.Module):  # mmcv's BaseModule -> nn.Module
    def __init__(self, in_channels=128):
        super().__init__()
        self.up_add1 = SeparableConv2d(in_channels, in_channels, 1)
        self.up_add2 = SeparableConv2d(in_channels, in_channels, 1)
        self.up_add3 = SeparableConv2d(in_channels, in_channels, 1)
        self.down_add1 = SeparableConv2d(in_channels, in_channels, 2)
        self.down_add2 = SeparableConv2d(in_channels, in_channels, 2)
        self.down_add3 = SeparableConv2d(in_channels, in_channels, 2)

    def forward(self, c2, c3, c4, c5):
        # upsample
        c4 = self.up_add1(self._upsample_add(c5, c4))  # c4 shape
        c3 = self.up_add2(self._upsample_add(c4, c3))
        c2 = self.up_add3(self._upsample_add(c3, c2))
        # downsample
        c3 = self.down_add1(self._upsample_add(c3, c2))
        c4 = self.down_add2(self._upsample_add(c4, c3))
        c5 = self.down_add3(self._upsample_add(c5, c4))  # c4 / 2
        return c2, c3, c4, c5

    def _upsample_add(self, x, y):
        return F.interpolate(x, size=y.size()[2:]) + y


class SeparableConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.depthwise_conv = nn.Conv2d(in_channels, in_channels, kernel_size=3, padding=1, stride=stride,
                                        groups=in_channels)
        self.pointwise_conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.pointwise_conv(self.depthwise_conv(x))))


class FPEM_FFM(nn.Module):  # registry decorator and Xavier init_cfg left out
    def __init__(self, in_channels, conv_out=128, fpem_repeat=2, align_corners=False):
        super().__init__()
        self.reduce_conv_c2 = nn.Sequential(nn.Conv2d(in_channels[0], conv_out, 1), nn.BatchNorm2d(conv_out), nn.ReLU())
        self.reduce_conv_c3 = nn.Sequential(nn.Conv2d(in_channels[1], conv_out, 1), nn.BatchNorm2d(conv_out), nn.ReLU())
        self.reduce_conv_c4 = nn.Sequential(nn.Conv2d(in_channels[2], conv_out, 1), nn.BatchNorm2d(conv_out), nn.ReLU())
        self.reduce_conv_c5 = nn.Sequential(nn.Conv2d(in_channels[3], conv_out, 1), nn.BatchNorm2d(conv_out), nn.ReLU())
        self.align_corners = align_corners
        self.fpems = nn.ModuleList()
        for _ in range(fpem_repeat):
            self.fpems.append(FPEM(conv_out))

    def forward(self, x):
        c2, c3, c4, c5 = x
        c2 = self.reduce_conv_c2(c2)
        c3 = self.reduce_conv_c3(c3)
        c4 = self.reduce_conv_c4(c4)
        c5 = self.reduce_conv_c5(c5)
        # FPEM
        for i, fpem in enumerate(self.fpems):
            c2, c3, c4, c5 = fpem(c2, c3, c4, c5)
            if i == 0:
                c2_ffm = c2
                c3_ffm = c3
                c4_ffm = c4
                c5_ffm = c5
            else:
                c2_ffm += c2  # ROOT
                c3_ffm = c3_ffm + c3  # the other three sums are written out of place here, as the fix writes them
                c4_ffm = c4_ffm + c4
                c5_ffm = c5_ffm + c5
        # FFM
        size = c2_ffm.size()[-2:]
        c5 = F.interpolate(c5_ffm, size, mode='bilinear', align_corners=self.align_corners)
        c4 = F.interpolate(c4_ffm, size, mode='bilinear', align_corners=self.align_corners)
        c3 = F.interpolate(c3_ffm, size, mode='bilinear', align_corners=self.align_corners)
        return tuple([c2_ffm, c3, c4, c5])


torch.manual_seed(0)
backbone = nn.ModuleList(nn.Sequential(nn.Conv2d(3 if i == 0 else 8, 8, 3, stride=2, padding=1), nn.ReLU())
                         for i in range(4))  # stands for the ResNet stages C2..C5
neck = FPEM_FFM(in_channels=[8, 8, 8, 8], conv_out=16)
head = nn.Conv2d(64, 2, 1)  # stands for PANet's head: text and kernel maps
params = list(backbone.parameters()) + list(neck.parameters()) + list(head.parameters())
optimizer = torch.optim.SGD(params, lr=0.01)
img, gt = torch.randn(2, 3, 64, 64), torch.rand(2, 2, 32, 32)
feats, x = [], img
for stage in backbone:
    x = stage(x)
    feats.append(x)
out = head(torch.cat(neck(feats), dim=1))
loss = F.binary_cross_entropy_with_logits(out, gt)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
print("loss", loss.item())
