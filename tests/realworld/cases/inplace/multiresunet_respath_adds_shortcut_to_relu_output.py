"""MultiResUNet Respath: x = self.conv2d_bn_3x3(x) ends in F.relu, whose output autograd saves, and x += shortcut then adds the 1x1 shortcut into that output in place, so backward finds the ReLU result modified.

source: https://github.com/j-sripad/mulitresunet-pytorch/issues/3
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
from typing import Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv2d_batchnorm(nn.Module):
    def __init__(self, input_features: int, num_of_filters: int, kernel_size: Tuple = (2, 2), stride: Tuple = (1, 1),
                 activation: str = 'relu', padding: int = 0) -> None:
        super().__init__()
        self.activation = activation
        self.conv1 = nn.Conv2d(in_channels=input_features, out_channels=num_of_filters, kernel_size=kernel_size,
                               stride=stride, padding=padding)
        self.batchnorm = nn.BatchNorm2d(num_of_filters, affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        x = self.batchnorm(x)
        if self.activation == 'relu':
            return F.relu(x)
        else:
            return x


class Respath(nn.Module):
    def __init__(self, input_features: int, filters: int, respath_length: int) -> None:
        super().__init__()
        self.filters = filters
        self.respath_length = respath_length
        self.conv2d_bn_1x1 = Conv2d_batchnorm(input_features=input_features, num_of_filters=self.filters,
                                              kernel_size=(1, 1), activation='None', padding=0)
        self.conv2d_bn_3x3 = Conv2d_batchnorm(input_features=input_features, num_of_filters=self.filters,
                                              kernel_size=(3, 3), activation='relu', padding=1)
        self.batch_norm1 = nn.BatchNorm2d(filters, affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.conv2d_bn_1x1(x)
        x = self.conv2d_bn_3x3(x)
        x += shortcut  # ROOT
        x = F.relu(x)
        x = self.batch_norm1(x)
        return x


class MultiResUnet(nn.Module):
    def __init__(self, channels: int, filters: int = 4, nclasses: int = 1) -> None:
        super().__init__()
        self.block1 = Conv2d_batchnorm(channels, filters, kernel_size=(3, 3), padding=1)
        self.pool1 = nn.MaxPool2d(2, stride=2)
        self.respath1 = Respath(input_features=filters, filters=filters, respath_length=1)
        self.block2 = Conv2d_batchnorm(filters, filters * 2, kernel_size=(3, 3), padding=1)
        self.upsample = nn.ConvTranspose2d(filters * 2, filters, kernel_size=(2, 2), stride=(2, 2))
        self.block3 = Conv2d_batchnorm(filters * 2, filters, kernel_size=(3, 3), padding=1)
        self.conv_final = Conv2d_batchnorm(input_features=filters, num_of_filters=nclasses, kernel_size=(1, 1),
                                           activation='None')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_multires1 = self.block1(x)
        x_pool1 = self.pool1(x_multires1)
        x_multires1 = self.respath1(x_multires1)
        x_multires2 = self.block2(x_pool1)
        up = torch.cat([self.upsample(x_multires2), x_multires1], axis=1)
        return torch.sigmoid(self.conv_final(self.block3(up)))


torch.manual_seed(0)
model = MultiResUnet(channels=3)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.BCELoss()
for image, mask in [(torch.randn(2, 3, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()) for _ in range(2)]:
    pred = model(image)
    loss = criterion(pred, mask)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
