"""imgclsmob Xception: the unit computes its identity branch with a strided 1x1 convolution of x (which saves x for backward) and then applies its pre-activation self.activ = nn.ReLU(inplace=True) to x itself, overwriting the tensor the skip convolution needs.

source: https://github.com/osmr/imgclsmob/issues/13
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class DwsConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.dw_conv = nn.Conv2d(in_channels, in_channels, 3, padding=1, groups=in_channels, bias=False)
        self.pw_conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return self.bn(self.pw_conv(self.dw_conv(x)))


class XceptionUnit(nn.Module):
    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.identity_conv = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)
        self.identity_bn = nn.BatchNorm2d(out_channels)
        self.activ = nn.ReLU(inplace=True)
        self.body1 = DwsConv(in_channels, out_channels)
        self.body2 = DwsConv(out_channels, out_channels)
        self.pool = nn.MaxPool2d(3, stride=stride, padding=1)

    def forward(self, x):
        identity = self.identity_bn(self.identity_conv(x))
        x = self.activ(x)  # ROOT
        x = self.body1(x)
        x = self.body2(torch.relu(x))
        x = self.pool(x)
        return x + identity


class Xception(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.init_block = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16))
        self.stage1 = XceptionUnit(16, 32, stride=2)
        self.stage2 = XceptionUnit(32, 64, stride=2)
        self.output = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))

    def forward(self, x):
        return self.output(self.stage2(self.stage1(self.init_block(x))))


torch.manual_seed(0)
model = Xception()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
loss = criterion(model(x), y)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
