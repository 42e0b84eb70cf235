"""ER-Net 3D residual block adds the shortcut with `out += residual` to the output of a ReLU, which ReLU saved for backward.

source: https://github.com/iMED-Lab/ER-Net/pull/3
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class ResEncoder(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv1 = nn.Conv3d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm3d(out_channels)
        self.conv2 = nn.Conv3d(out_channels, out_channels, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm3d(out_channels)
        self.relu = nn.ReLU(inplace=False)
        self.conv1x1 = nn.Conv3d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        residual = self.conv1x1(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out += residual  # ROOT
        out = self.relu(out)
        return out


torch.manual_seed(0)
encoder = ResEncoder(1, 4)
head = nn.Conv3d(4, 2, kernel_size=1)
optimizer = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=1e-4)
image, label = torch.randn(2, 1, 8, 8, 8), torch.randint(0, 2, (2, 8, 8, 8))
loss = nn.functional.cross_entropy(head(encoder(image)), label)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
