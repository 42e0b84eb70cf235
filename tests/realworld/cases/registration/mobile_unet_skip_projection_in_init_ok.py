"""Mobile-UNet's InvertedResidualBlock with the fix: the 1x1 skip projection is built once in __init__.

source: https://github.com/lafith/Mobile-UNet/issues/1
kind: lookalike
verified: the skip projection conv is in model.parameters() and receives a gradient
"""
import torch
import torch.nn as nn


class InvertedResidualBlock(nn.Module):
    def __init__(self, in_c, out_c, stride, expansion_factor=6):
        super(InvertedResidualBlock, self).__init__()
        assert stride in [1, 2]
        self.stride, self.in_c, self.out_c = stride, in_c, out_c
        self.use_skip_connection = True if self.stride == 1 else False
        ex_c = int(self.in_c * expansion_factor)
        self.skip = nn.Conv2d(in_c, out_c, 1, 1, 0, bias=False) if stride == 1 and in_c != out_c else nn.Identity()
        self.conv = nn.Sequential(
            nn.Conv2d(self.in_c, ex_c, 1, 1, 0, bias=False), nn.BatchNorm2d(ex_c), nn.ReLU6(inplace=True),
            nn.Conv2d(ex_c, ex_c, 3, self.stride, 1, groups=ex_c, bias=False), nn.BatchNorm2d(ex_c),
            nn.ReLU6(inplace=True),
            nn.Conv2d(ex_c, self.out_c, 1, 1, 0, bias=False), nn.BatchNorm2d(self.out_c),
        )

    def forward(self, x):
        if self.use_skip_connection:
            out = self.conv(x)
            x = self.skip(x)
            return x + out
        else:
            return self.conv(x)


class MobileUNetEncoder(nn.Module):
    def __init__(self):
        super(MobileUNetEncoder, self).__init__()
        self.conv3x3 = nn.Conv2d(3, 8, 3, padding=1, stride=2)
        self.irb_bottleneck1 = nn.Sequential(InvertedResidualBlock(8, 4, 1, 1))
        self.irb_bottleneck2 = nn.Sequential(InvertedResidualBlock(4, 6, 2, 6), InvertedResidualBlock(6, 6, 1, 6))
        self.head = nn.Conv2d(6, 1, 1)

    def forward(self, x):
        return self.head(self.irb_bottleneck2(self.irb_bottleneck1(self.conv3x3(x))))


torch.manual_seed(0)
model = MobileUNetEncoder()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.rand(2, 3, 16, 16), torch.rand(2, 1, 4, 4)
for _ in range(2):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("skip trained:", model.irb_bottleneck1[0].skip.weight.grad is not None)
