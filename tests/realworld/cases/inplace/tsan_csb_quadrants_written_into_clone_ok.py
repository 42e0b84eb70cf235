"""TSAN's CSB block with the fix from the issue: the quadrants are written into x.clone(), not into the input.

source: https://github.com/Jee-King/TSAN/issues/3
kind: lookalike
verified: backward succeeds and every conv weight gets a gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CSB(nn.Module):
    def __init__(self, n_feats):
        super(CSB, self).__init__()
        self.conv1 = nn.Conv2d(n_feats * 4, n_feats * 4, kernel_size=1, padding=0, bias=False)

    def forward(self, x):
        h, w = x.size(2) // 2, x.size(3) // 2
        f1, f2 = x[:, :, 0:h, 0:w], x[:, :, h:, 0:w]
        f3, f4 = x[:, :, 0:h, w:], x[:, :, h:, w:]
        f_all = self.conv1(torch.cat([f1, f2, f3, f4], 1))
        c = f_all.size(1) // 4
        out = x.clone()
        out[:, :, 0:h, 0:w] = f_all[:, 0:c]
        out[:, :, h:, 0:w] = f_all[:, c:2 * c]
        out[:, :, 0:h, w:] = f_all[:, 2 * c:3 * c]
        out[:, :, h:, w:] = f_all[:, 3 * c:]
        return out


class MCAB(nn.Module):
    def __init__(self, n_feats):
        super(MCAB, self).__init__()
        self.drb = nn.Conv2d(n_feats, n_feats, 3, padding=1)
        self.csb = CSB(n_feats)
        self.conv3 = nn.Conv2d(n_feats, n_feats, kernel_size=3, padding=1, bias=False)

    def forward(self, x):
        down_b = self.drb(x)
        top_b = self.csb(x)
        top_b = F.sigmoid(self.conv3(top_b))
        return down_b * top_b


torch.manual_seed(0)
first_conv = nn.Conv2d(3, 4, 1)
relu = nn.ReLU(inplace=True)
body = MCAB(4)
lr_img, hr_img = torch.randn(2, 3, 8, 8), torch.randn(2, 4, 8, 8)
first_out = relu(first_conv(lr_img))
loss = F.l1_loss(body(first_out), hr_img)
loss.backward()
print(all(p.grad is not None for p in body.parameters()))
