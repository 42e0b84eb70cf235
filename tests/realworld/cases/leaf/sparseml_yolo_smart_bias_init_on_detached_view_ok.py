"""sparseml's YoloV3 detection block after PR 94 does YOLO's smart bias initialization on b = self.conv.bias.view(3, -1).detach(), a tensor outside autograd, and wraps the result in a new Parameter, so the model builds and trains.

source: https://github.com/neuralmagic/sparseml/pull/94
kind: lookalike
"""
import math

import torch
from torch.nn import Conv2d, Module, Parameter, init


def _init_conv(conv: Conv2d):
    init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")


class _YoloDetectionBlock(Module):
    def __init__(self, in_channels: int, num_classes: int, num_anchors: int):
        super().__init__()
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.num_outputs_per_anchor = 5 + num_classes  # 4 bbox coords + 1 obj. score
        conv_out_channels = self.num_anchors * self.num_outputs_per_anchor
        self.conv = Conv2d(in_channels, conv_out_channels, kernel_size=1, stride=1, padding=0, bias=True)
        self.initialize()

    def forward(self, inp):
        out = self.conv(inp)
        bs, _, feat_y, feat_x = out.shape
        out = (
            out.view(bs, self.num_anchors, self.num_outputs_per_anchor, feat_y, feat_x)
            .permute(0, 1, 3, 4, 2)
            .contiguous()
        )
        return out

    def initialize(self):
        _init_conv(self.conv)
        # smart bias initialization
        b = self.conv.bias.view(3, -1).detach()
        b[:, 4] += math.log(8 / 640 ** 2)
        b[:, 5:] += math.log(0.6 / (self.num_classes - 0.99))
        self.conv.bias = Parameter(b.view(-1), requires_grad=True)


class YoloV3(Module):  # the backbone and the convolutional head reduced to one conv; one detector scale
    def __init__(self, num_classes: int):
        super().__init__()
        self.backbone = torch.nn.Sequential(Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU())
        self.detector = torch.nn.ModuleList([_YoloDetectionBlock(16, num_classes, 3)])

    def forward(self, inp):
        return [detector(self.backbone(inp)) for detector in self.detector]


torch.manual_seed(0)
model = YoloV3(num_classes=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
outputs = model(torch.randn(2, 3, 16, 16))
objectness = outputs[0][..., 4]
loss = torch.nn.functional.binary_cross_entropy_with_logits(objectness, torch.zeros_like(objectness))
loss.backward()
optimizer.step()
print("objectness bias", [round(v, 3) for v in model.detector[0].conv.bias.view(3, -1)[:, 4].tolist()], "loss", round(loss.item(), 4))
