"""fepegar's unet (the UNet behind TorchIO's examples) ends a residual EncodingBlock with x = self.conv2(x); x += connection: conv2 is a ConvolutionalBlock ending in ReLU, whose backward needs its output, so the in-place add of the residual connection changes a tensor saved for the backward and training a UNet with residual=True fails at loss.backward().

source: https://github.com/fepegar/unet/pull/37
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvolutionalBlock(nn.Module):
    def __init__(self, dimensions: int, in_channels: int, out_channels: int, normalization: Optional[str] = None,
                 kernel_size: int = 3, activation: Optional[str] = 'ReLU', preactivation: bool = False,
                 padding: int = 0, padding_mode: str = 'zeros', dilation: Optional[int] = None, dropout: float = 0):
        super().__init__()
        block = nn.ModuleList()
        dilation = 1 if dilation is None else dilation
        if padding:
            total_padding = kernel_size + 2 * (dilation - 1) - 1
            padding = total_padding // 2
        conv_class = getattr(nn, 'Conv{}d'.format(dimensions))
        no_bias = not preactivation and (normalization is not None)
        conv_layer = conv_class(in_channels, out_channels, kernel_size, padding=padding, padding_mode=padding_mode,
                                dilation=dilation, bias=not no_bias)
        norm_layer = None
        if normalization is not None:
            norm_class = getattr(nn, '{}Norm{}d'.format(normalization.capitalize(), dimensions))
            norm_layer = norm_class(in_channels if preactivation else out_channels)
        activation_layer = None
        if activation is not None:
            activation_layer = getattr(nn, activation)()
        for module in ([norm_layer, activation_layer, conv_layer] if preactivation
                       else [conv_layer, norm_layer, activation_layer]):
            if module is not None:
                block.append(module)
        self.conv_layer = conv_layer
        self.block = nn.Sequential(*block)

    def forward(self, x):
        return self.block(x)


class EncodingBlock(nn.Module):  # the dropout and dilation arguments left out
    def __init__(self, in_channels, out_channels_first, dimensions, normalization, pooling_type,
                 preactivation=False, is_first_block=False, residual=False, padding=0, activation='ReLU'):
        super().__init__()
        self.residual = residual
        self.conv1 = ConvolutionalBlock(dimensions, in_channels, out_channels_first,
                                        normalization=None if is_first_block else normalization,
                                        preactivation=None if is_first_block else preactivation,
                                        padding=padding, activation=activation)
        out_channels_second = out_channels_first if dimensions == 2 else 2 * out_channels_first
        self.conv2 = ConvolutionalBlock(dimensions, out_channels_first, out_channels_second,
                                        normalization=normalization, preactivation=preactivation,
                                        padding=padding, activation=activation)
        if residual:
            self.conv_residual = ConvolutionalBlock(dimensions, in_channels, out_channels_second, kernel_size=1,
                                                    normalization=None, activation=None)
        self.downsample = None
        if pooling_type is not None:
            self.downsample = getattr(nn, '{}Pool{}d'.format(pooling_type.capitalize(), dimensions))(2)

    def forward(self, x):
        if self.residual:
            connection = self.conv_residual(x)
            x = self.conv1(x)
            x = self.conv2(x)
            x += connection  # ROOT
        else:
            x = self.conv1(x)
            x = self.conv2(x)
        if self.downsample is None:
            return x
        skip_connection = x
        x = self.downsample(x)
        return x, skip_connection


class ResidualUNetEncoder(nn.Module):  # stands for UNet(residual=True): two encoding blocks, the bottom block, a 1x1 classifier
    def __init__(self, in_channels=1, out_classes=2, first=4):
        super().__init__()
        self.block1 = EncodingBlock(in_channels, first, 2, 'batch', 'max', is_first_block=True, residual=True, padding=1)
        self.block2 = EncodingBlock(first, 2 * first, 2, 'batch', 'max', residual=True, padding=1)
        self.bottom_block = EncodingBlock(2 * first, 4 * first, 2, 'batch', None, residual=True, padding=1)
        self.classifier = ConvolutionalBlock(2, 4 * first, out_classes, kernel_size=1, activation=None)

    def forward(self, x):
        x, _ = self.block1(x)
        x, _ = self.block2(x)
        return self.classifier(self.bottom_block(x))


torch.manual_seed(0)
model = ResidualUNetEncoder()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images, labels = torch.randn(2, 1, 32, 32), torch.randint(0, 2, (2, 8, 8))
loss = F.cross_entropy(model(images), labels)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
print("loss", loss.item())
