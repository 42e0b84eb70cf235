"""YOLOv4-pytorch's CSPDarknet53 with activate='relu': CSPBlock adds the shortcut with `out += residual` into the output of the block's last ReLU, which ReLU's backward needs.

source: https://github.com/argusswift/YOLOv4-pytorch/issues/247
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class Convolutional(nn.Module):
    def __init__(self, filters_in, filters_out, kernel_size, stride=1, activate="relu"):
        super().__init__()
        self.__conv = nn.Conv2d(filters_in, filters_out, kernel_size, stride, kernel_size // 2, bias=False)
        self.__norm = nn.BatchNorm2d(filters_out)
        self.__activate = nn.ReLU(inplace=True) if activate == "relu" else nn.Mish()

    def forward(self, x):
        return self.__activate(self.__norm(self.__conv(x)))


class CSPBlock(nn.Module):
    def __init__(self, in_channels, out_channels, hidden_channels=None, activate="relu"):
        super().__init__()
        if hidden_channels is None:
            hidden_channels = out_channels
        self.block = nn.Sequential(
            Convolutional(in_channels, hidden_channels, 1, activate=activate),
            Convolutional(hidden_channels, out_channels, 3, activate=activate),
        )

    def forward(self, x):
        residual = x
        out = self.block(x)
        out += residual  # ROOT
        return out


class CSPFirstStage(nn.Module):
    def __init__(self, in_channels, out_channels, activate="relu"):
        super().__init__()
        self.downsample_conv = Convolutional(in_channels, out_channels, 3, stride=2, activate=activate)
        self.split_conv0 = Convolutional(out_channels, out_channels, 1, activate=activate)
        self.split_conv1 = Convolutional(out_channels, out_channels, 1, activate=activate)
        self.blocks_conv = nn.Sequential(
            CSPBlock(out_channels, out_channels, in_channels, activate=activate),
            Convolutional(out_channels, out_channels, 1, activate=activate),
        )
        self.concat_conv = Convolutional(out_channels * 2, out_channels, 1, activate=activate)

    def forward(self, x):
        x = self.downsample_conv(x)
        x0 = self.split_conv0(x)
        x1 = self.split_conv1(x)
        x1 = self.blocks_conv(x1)
        return self.concat_conv(torch.cat([x0, x1], dim=1))


torch.manual_seed(0)
stem = Convolutional(3, 16, 3, activate="relu")
stage = CSPFirstStage(16, 32, activate="relu")
head = nn.Conv2d(32, 8, 1)
imgs = torch.randn(2, 3, 32, 32)
loss = head(stage(stem(imgs))).pow(2).mean()
loss.backward()  # SYMPTOM
