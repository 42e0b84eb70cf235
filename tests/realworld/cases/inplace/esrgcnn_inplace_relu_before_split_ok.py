"""An ESRGCNN-style MFCModule that applies its in-place ReLU to the whole convolution output before torch.split (a fresh tensor, not a view produced by split) and only reads the split views afterwards, so training runs.

source: https://github.com/hellloxiaotian/ESRGCNN/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MeanShift(nn.Module):
    def __init__(self, mean_rgb, sub):
        super().__init__()
        sign = -1 if sub else 1
        self.register_buffer("shift", torch.tensor(mean_rgb).view(1, 3, 1, 1) * sign)

    def forward(self, x):
        return x + self.shift


class MFCModule(nn.Module):
    def __init__(self, in_channels, out_channels, gropus=1):
        super(MFCModule, self).__init__()
        kernel_size = 3
        padding = 1
        features = 64
        features1 = 48
        distill_rate = 0.25
        self.distilled_channels = int(features * distill_rate)
        self.remaining_channels = int(features - self.distilled_channels)
        self.conv1_1 = nn.Sequential(nn.Conv2d(in_channels=features, out_channels=features, kernel_size=kernel_size, padding=padding, groups=1, bias=False))
        self.conv1_2 = nn.Sequential(nn.Conv2d(in_channels=features1, out_channels=features, kernel_size=kernel_size, padding=padding, groups=1, bias=False))
        self.conv1_3 = nn.Sequential(nn.Conv2d(in_channels=features1, out_channels=features, kernel_size=kernel_size, padding=padding, groups=1, bias=False))
        self.conv1_5 = nn.Sequential(nn.Conv2d(in_channels=features, out_channels=features, kernel_size=kernel_size, padding=padding, groups=1, bias=False), nn.ReLU(inplace=True))
        self.ReLU = nn.ReLU(inplace=True)

    def forward(self, input):
        out1_c = self.ReLU(self.conv1_1(input))
        dit1, remain1 = torch.split(out1_c, (self.distilled_channels, self.remaining_channels), dim=1)
        out1_r = remain1
        out2_c = self.conv1_2(out1_r)
        dit2, remain2 = torch.split(out2_c, (self.distilled_channels, self.remaining_channels), dim=1)
        remain2 = remain2 + remain1
        out2_r = self.ReLU(remain2)
        out3_c = self.conv1_3(out2_r)
        dit3, remain3 = torch.split(out3_c, (self.distilled_channels, self.remaining_channels), dim=1)
        remain3 = remain3 + remain2
        dit = dit1 + dit2 + dit3
        out_t = torch.cat([dit, remain3], dim=1)
        out_r = self.ReLU(out_t)
        out5_r = self.conv1_5(out_r)
        return input + out5_r


class Net(nn.Module):
    def __init__(self, **kwargs):
        super(Net, self).__init__()
        scale = kwargs.get("scale")
        features = 64
        self.sub_mean = MeanShift((0.4488, 0.4371, 0.4040), sub=True)
        self.add_mean = MeanShift((0.4488, 0.4371, 0.4040), sub=False)
        self.conv1_1 = nn.Sequential(nn.Conv2d(3, features, 3, padding=1, bias=False), nn.ReLU(inplace=True))
        self.b1 = MFCModule(features, features)
        self.b2 = MFCModule(features, features)
        self.upsample = nn.Sequential(nn.Conv2d(features, features * scale * scale, 3, padding=1), nn.PixelShuffle(scale))
        self.conv3 = nn.Conv2d(features, 3, 3, padding=1, bias=False)

    def forward(self, x, scale):
        x = self.sub_mean(x)
        x1 = self.conv1_1(x)
        b2 = self.b2(self.b1(x1))
        out = self.conv3(F.relu(self.upsample(b2)))
        return self.add_mean(out)


torch.manual_seed(0)
scale = 2
net = Net(scale=scale)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
for step in range(2):
    lr_img, hr_img = torch.rand(1, 3, 8, 8), torch.rand(1, 3, 16, 16)
    sr = net(lr_img, scale)
    loss = F.l1_loss(sr, hr_img)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
