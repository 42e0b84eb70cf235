"""MONAI's SSIMLoss after the fix (PR 5686): it calls SSIMMetric(...)._compute_tensor(x, y) directly, skipping the detaching IterationMetric.__call__, so the loss keeps the network output's graph and trains.

source: https://github.com/Project-MONAI/MONAI/issues/5668
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.loss import _Loss


class IterationMetric:
    def __call__(self, y_pred, y=None):
        y_ = y.detach() if isinstance(y, torch.Tensor) else None
        return self._compute_tensor(y_pred.detach(), y_)


class SSIMMetric(IterationMetric):
    def __init__(self, data_range, win_size=7, k1=0.01, k2=0.03, spatial_dims=2):
        self.data_range = data_range
        self.win_size = win_size
        self.k1, self.k2 = k1, k2
        self.spatial_dims = spatial_dims

    def _compute_tensor(self, x, y):
        w = torch.ones(1, 1, self.win_size, self.win_size, device=x.device) / self.win_size ** 2
        c1 = (self.k1 * self.data_range) ** 2
        c2 = (self.k2 * self.data_range) ** 2
        ux, uy = F.conv2d(x, w), F.conv2d(y, w)
        uxx, uyy, uxy = F.conv2d(x * x, w), F.conv2d(y * y, w), F.conv2d(x * y, w)
        vx, vy, vxy = uxx - ux * ux, uyy - uy * uy, uxy - ux * uy
        ssim_map = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
        return ssim_map.view(ssim_map.shape[0], -1).mean(1, keepdim=True)


class SSIMLoss(_Loss):
    def __init__(self, win_size=7, k1=0.01, k2=0.03, spatial_dims=2):
        super().__init__()
        self.win_size = win_size
        self.k1, self.k2 = k1, k2
        self.spatial_dims = spatial_dims

    def forward(self, x, y, data_range):
        ssim_value = SSIMMetric(data_range, self.win_size, self.k1, self.k2, self.spatial_dims)._compute_tensor(x, y).view(-1, 1)
        loss = 1 - ssim_value
        if self.reduction == "mean":
            loss = torch.mean(loss)
        return loss


torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
loss_function = SSIMLoss(spatial_dims=2)
for step in range(3):
    target = torch.rand(2, 1, 16, 16)
    noisy = target + 0.1 * torch.randn_like(target)
    output = net(noisy)
    data_range = target.max().unsqueeze(0)
    loss = loss_function(output, target, data_range)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
