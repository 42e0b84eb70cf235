"""RPNet's IncUNet (R-peak detection on ECG) opens its second encoder stage `e2` with `nn.LeakyReLU(0.2, inplace=True)`, applied straight to the output of stage `e1`, whose last module is an `IncResBlock` ending in `nn.ReLU()`: the in-place activation overwrites the tensor that ReLU saved for its backward (and that the decoder concatenates later), so `loss.backward()` in the training loop fails.

source: https://github.com/acrarshin/RPNet/pull/6
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class IncResBlock(nn.Module):
    def __init__(self, inplanes, planes, convstr=1, convsize=15, convpadding=7):
        super(IncResBlock, self).__init__()
        self.Inputconv1x1 = nn.Conv1d(inplanes, planes, kernel_size=1, stride=1, bias=False)
        self.conv1_1 = nn.Sequential(
            nn.Conv1d(in_channels=inplanes, out_channels=planes // 4, kernel_size=convsize, stride=convstr,
                      padding=convpadding),
            nn.BatchNorm1d(planes // 4))
        self.conv1_2 = nn.Sequential(
            nn.Conv1d(inplanes, planes // 4, kernel_size=1, stride=convstr, padding=0, bias=False),
            nn.BatchNorm1d(planes // 4),
            nn.LeakyReLU(0.2, ),
            nn.Conv1d(in_channels=planes // 4, out_channels=planes // 4, kernel_size=convsize + 2, stride=convstr,
                      padding=convpadding + 1),
            nn.BatchNorm1d(planes // 4))
        self.relu = nn.ReLU()

    def forward(self, x):
        residual = self.Inputconv1x1(x)
        c1 = self.conv1_1(x)
        c2 = self.conv1_2(x)
        out = torch.cat([c1, c2, c1, c2], 1)
        out += residual
        out = self.relu(out)
        return out


class IncUNet(nn.Module):
    """Reduced: two encoder stages and two decoder stages instead of eight and ten."""

    def __init__(self, in_shape):
        super(IncUNet, self).__init__()
        in_channels, height, width = in_shape
        self.e1 = nn.Sequential(
            nn.Conv1d(in_channels, 16, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm1d(16),
            nn.LeakyReLU(0.2, ),
            IncResBlock(16, 16))
        self.e2 = nn.Sequential(
            nn.LeakyReLU(0.2, inplace=True),  # ROOT
            nn.Conv1d(16, 32, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm1d(32),
            IncResBlock(32, 32))
        self.d1 = nn.Sequential(
            nn.LeakyReLU(0.2, ),
            nn.ConvTranspose1d(32, 16, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm1d(16))
        self.out_l = nn.Sequential(
            nn.LeakyReLU(0.2, ),
            nn.ConvTranspose1d(32, in_channels, kernel_size=4, stride=2, padding=1))

    def forward(self, x):
        en1 = self.e1(x)
        en2 = self.e2(en1)
        de1_ = self.d1(en2)
        de1 = torch.cat([en1, de1_], 1)
        out = self.out_l(de1)
        return out


model = IncUNet((1, 1, 256))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.SmoothL1Loss()
ecg = torch.randn(8, 1, 256)
target = torch.zeros(8, 1, 256)
target[:, :, ::64] = 1.0  # synthetic R-peak distance map

for epoch in range(3):
    optimizer.zero_grad()
    output = model(ecg)
    loss = criterion(output, target)
    loss.backward()  # SYMPTOM
    optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
