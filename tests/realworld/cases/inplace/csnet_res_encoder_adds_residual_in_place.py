"""CS-Net ResEncoder: out = self.relu(self.bn2(self.conv2(out))) is the saved output of a non-in-place ReLU, and out += residual then changes it in place, so the backward pass of that ReLU finds its output at a newer version.

source: https://github.com/iMED-Lab/CS-Net/pull/6
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResEncoder(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(ResEncoder, self).__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=False)
        self.conv1x1 = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        residual = self.conv1x1(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out += residual  # ROOT
        out = self.relu(out)
        return out


class CSNet(nn.Module):
    def __init__(self, classes, channels):
        super(CSNet, self).__init__()
        self.enc_input = ResEncoder(channels, 8)
        self.encoder1 = ResEncoder(8, 16)
        self.downsample = nn.MaxPool2d(kernel_size=2, stride=2)
        self.deconv1 = nn.ConvTranspose2d(16, 8, kernel_size=2, stride=2)
        self.decoder1 = nn.Sequential(nn.Conv2d(16, 8, kernel_size=3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.final = nn.Conv2d(8, classes, kernel_size=1)

    def forward(self, x):
        enc_input = self.enc_input(x)
        enc1 = self.encoder1(self.downsample(enc_input))
        up1 = torch.cat((enc_input, self.deconv1(enc1)), dim=1)
        return torch.sigmoid(self.final(self.decoder1(up1)))


torch.manual_seed(0)
net = CSNet(classes=1, channels=1)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-4, weight_decay=5e-4)
critrion = nn.MSELoss()
for idx in range(2):
    image, label = torch.randn(2, 1, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()
    optimizer.zero_grad()
    pred = net(image)
    loss = critrion(pred, label) + F.binary_cross_entropy(pred, label)
    loss.backward()  # SYMPTOM
    optimizer.step()
