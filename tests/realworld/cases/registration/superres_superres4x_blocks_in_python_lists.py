"""SuperResolution SuperRes4x: the residual and upsampling blocks are kept in plain Python lists (self.rs, self.up), so model.parameters() misses them and Adam never updates their convolutions or batch norms, although backward fills their gradients.

source: https://github.com/bguisard/SuperResolution/issues/2
kind: bug
symptom: silent
verified: after 5 Adam steps (lr 1e-3) rs[0].c1.weight is unchanged (max abs difference 0.0) although its gradient has norm 0.11, while c1 moved by 0.0050; model.parameters() holds 7827 values against 31347 with nn.ModuleList (which moves rs[0].c1.weight by 0.0050)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualBlock(nn.Module):
    def __init__(self, num):
        super(ResidualBlock, self).__init__()
        self.c1 = nn.Conv2d(num, num, kernel_size=3, stride=1, padding=1)
        self.c2 = nn.Conv2d(num, num, kernel_size=3, stride=1, padding=1)
        self.b1 = nn.BatchNorm2d(num)
        self.b2 = nn.BatchNorm2d(num)

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = self.b2(self.c2(h))
        return h + x


class UpsampleBlock(nn.Module):
    def __init__(self, num):
        super(UpsampleBlock, self).__init__()
        self.up1 = nn.UpsamplingNearest2d(scale_factor=2)
        self.c2 = nn.Conv2d(num, num, kernel_size=3, stride=1, padding=0)
        self.b3 = nn.BatchNorm2d(num)

    def forward(self, x):
        h = self.up1(x)
        h = F.pad(h, (1, 1, 1, 1), mode='reflect')
        h = self.b3(self.c2(h))
        return F.relu(h)


class SuperRes4x(nn.Module):
    def __init__(self):
        super(SuperRes4x, self).__init__()
        self.c1 = nn.Conv2d(3, 16, kernel_size=9, stride=1, padding=4)
        self.b2 = nn.BatchNorm2d(16)
        self.rs = [ResidualBlock(16) for i in range(4)]  # ROOT
        self.up = [UpsampleBlock(16) for i in range(2)]
        self.c3 = nn.Conv2d(16, 3, kernel_size=9, stride=1, padding=4)

    def forward(self, x):
        h = F.relu(self.b2(self.c1(x)))
        for r in self.rs:
            h = r(h)
        for u in self.up:
            h = u(h)
        h = torch.tanh(self.c3(h))
        h = torch.add(h, 1.)
        h = torch.mul(h, 0.5)
        return h


torch.manual_seed(0)
model = SuperRes4x()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    lr_img, hr_img = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 32, 32)
    optimizer.zero_grad()
    loss = F.mse_loss(model(lr_img), hr_img)
    loss.backward()
    optimizer.step()
print(step, loss.item())
