"""MobileNetV3-pytorch after "Fixes for in-place operations": `LinearBottleneck.forward` adds the residual out of place (`out = out + residual`), so the output of the in-place ReLU (the default `act_params={"inplace": True}`) that ReLU's backward reads is left intact and training runs.

source: https://github.com/Randl/MobileNetV3-pytorch/commit/7fa2a7f30add2bd5b30fa218450aca25fd7ec83b
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def hard_sigmoid(x, inplace=False):
    return F.relu6(x + 3, inplace) / 6


class HardSigmoid(nn.Module):
    def __init__(self, inplace=False):
        super(HardSigmoid, self).__init__()
        self.inplace = inplace

    def forward(self, x):
        return hard_sigmoid(x, inplace=self.inplace)


class SqEx(nn.Module):
    def __init__(self, n_features, reduction=4):
        super(SqEx, self).__init__()
        self.linear1 = nn.Linear(n_features, n_features // reduction, bias=True)
        self.nonlin1 = nn.ReLU(inplace=True)
        self.linear2 = nn.Linear(n_features // reduction, n_features, bias=True)
        self.nonlin2 = HardSigmoid()

    def forward(self, x):
        y = F.avg_pool2d(x, kernel_size=x.size()[2:4])
        y = y.permute(0, 2, 3, 1)
        y = self.nonlin1(self.linear1(y))
        y = self.nonlin2(self.linear2(y))
        y = y.permute(0, 3, 1, 2)
        return x * y


class LinearBottleneck(nn.Module):
    """As before the commit, without the DropBlock layers (drop_prob=0 makes them identities)."""

    def __init__(self, inplanes, outplanes, expplanes, k=3, stride=1,
                 activation=nn.ReLU, act_params={"inplace": True}, SE=False):
        super(LinearBottleneck, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, expplanes, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(expplanes)
        self.conv2 = nn.Conv2d(expplanes, expplanes, kernel_size=k, stride=stride, padding=k // 2, bias=False,
                               groups=expplanes)
        self.bn2 = nn.BatchNorm2d(expplanes)
        self.act2 = activation(**act_params)
        self.se = SqEx(expplanes) if SE else lambda x: x
        self.conv3 = nn.Conv2d(expplanes, outplanes, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(outplanes)
        self.act3 = activation(**act_params)
        self.stride = stride
        self.inplanes = inplanes
        self.outplanes = outplanes

    def forward(self, x):
        residual = x
        out = self.bn1(self.conv1(x))
        out = self.act2(self.bn2(self.conv2(out)))
        out = self.se(out)
        out = self.act3(self.bn3(self.conv3(out)))
        if self.stride == 1 and self.inplanes == self.outplanes:
            out = out + residual
        return out


class TinyMobileNetV3(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.bottlenecks = nn.Sequential(
            LinearBottleneck(16, 24, 64, stride=2),
            LinearBottleneck(24, 24, 72, SE=True),
            LinearBottleneck(24, 40, 72, k=5, stride=2, SE=True),
        )
        self.fc = nn.Linear(40, num_classes)

    def forward(self, x):
        x = self.bottlenecks(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


model = TinyMobileNetV3()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(3):
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
