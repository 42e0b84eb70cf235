"""EfficientDet-PyTorch's BiFPNBlock with the ReLU outputs cloned before the in-place normalisation (w1 = self.w1_relu(self.w1).clone(); w1 /= ...): the division writes into the copy, the ReLU output saved for backward is untouched and the fusion weights train.

source: https://github.com/tristandb/EfficientDet-PyTorch/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DepthwiseConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(DepthwiseConvBlock, self).__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, 1, groups=in_channels, bias=False)
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels, momentum=0.9997, eps=4e-5)
        self.act = nn.ReLU()

    def forward(self, inputs):
        return self.act(self.bn(self.pointwise(self.depthwise(inputs))))


class BiFPNBlock(nn.Module):
    def __init__(self, feature_size=8, epsilon=0.0001):
        super(BiFPNBlock, self).__init__()
        self.epsilon = epsilon
        self.p3_td = DepthwiseConvBlock(feature_size, feature_size)
        self.p4_td = DepthwiseConvBlock(feature_size, feature_size)
        self.p5_td = DepthwiseConvBlock(feature_size, feature_size)
        self.p6_td = DepthwiseConvBlock(feature_size, feature_size)
        self.p4_out = DepthwiseConvBlock(feature_size, feature_size)
        self.p5_out = DepthwiseConvBlock(feature_size, feature_size)
        self.p6_out = DepthwiseConvBlock(feature_size, feature_size)
        self.p7_out = DepthwiseConvBlock(feature_size, feature_size)
        self.w1 = nn.Parameter(torch.rand(2, 4))
        self.w1_relu = nn.ReLU()
        self.w2 = nn.Parameter(torch.rand(3, 4))
        self.w2_relu = nn.ReLU()

    def forward(self, inputs):
        p3_x, p4_x, p5_x, p6_x, p7_x = inputs
        w1 = self.w1_relu(self.w1).clone()
        w1 /= torch.sum(w1, dim=0) + self.epsilon
        w2 = self.w2_relu(self.w2).clone()
        w2 /= torch.sum(w2, dim=0) + self.epsilon

        p7_td = p7_x
        p6_td = self.p6_td(w1[0, 0] * p6_x + w1[1, 0] * F.interpolate(p7_x, scale_factor=2))
        p5_td = self.p5_td(w1[0, 1] * p5_x + w1[1, 1] * F.interpolate(p6_x, scale_factor=2))
        p4_td = self.p4_td(w1[0, 2] * p4_x + w1[1, 2] * F.interpolate(p5_x, scale_factor=2))
        p3_td = self.p3_td(w1[0, 3] * p3_x + w1[1, 3] * F.interpolate(p4_x, scale_factor=2))

        p3_out = p3_td
        p4_out = self.p4_out(w2[0, 0] * p4_x + w2[1, 0] * p4_td + w2[2, 0] * nn.Upsample(scale_factor=0.5)(p3_out))
        p5_out = self.p5_out(w2[0, 1] * p5_x + w2[1, 1] * p5_td + w2[2, 1] * nn.Upsample(scale_factor=0.5)(p4_out))
        p6_out = self.p6_out(w2[0, 2] * p6_x + w2[1, 2] * p6_td + w2[2, 2] * nn.Upsample(scale_factor=0.5)(p5_out))
        p7_out = self.p7_out(w2[0, 3] * p7_x + w2[1, 3] * p7_td + w2[2, 3] * nn.Upsample(scale_factor=0.5)(p6_out))
        return [p3_out, p4_out, p5_out, p6_out, p7_out]


torch.manual_seed(0)
bifpn = nn.Sequential(BiFPNBlock(8), BiFPNBlock(8))
optimizer = torch.optim.Adam(bifpn.parameters(), lr=1e-3)
features = [torch.randn(2, 8, s, s) for s in (16, 8, 4, 2, 1)]
outs = bifpn(features)
loss = sum(o.pow(2).mean() for o in outs)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item())
