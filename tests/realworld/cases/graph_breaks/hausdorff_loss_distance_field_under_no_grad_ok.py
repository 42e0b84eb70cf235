"""Hausdorff-distance loss: the distance maps are computed in numpy under no_grad; the loss still trains the net.

source: https://github.com/JunMa11/SegLossOdyssey/issues/17
kind: lookalike
verified: net weights receive gradients through (pred - target) ** 2; the distance maps are constants
"""
import numpy as np
import torch
import torch.nn as nn


class HausdorffDTLoss(nn.Module):
    def __init__(self, alpha=2.0):
        super(HausdorffDTLoss, self).__init__()
        self.alpha = alpha

    @torch.no_grad()
    def distance_field(self, img):
        field = np.zeros_like(img)
        for batch in range(len(img)):
            fg_mask = img[batch] > 0.5
            if fg_mask.any():
                ys, xs = np.nonzero(fg_mask[0])
                grid_y, grid_x = np.mgrid[0:img.shape[2], 0:img.shape[3]]
                d = np.sqrt((grid_y[..., None] - ys) ** 2 + (grid_x[..., None] - xs) ** 2).min(-1)
                field[batch, 0] = d
        return field

    def forward(self, pred, target):
        pred_dt = torch.from_numpy(self.distance_field(pred.detach().cpu().numpy())).float()
        target_dt = torch.from_numpy(self.distance_field(target.cpu().numpy())).float()
        pred_error = (pred - target) ** 2
        distance = pred_dt ** self.alpha + target_dt ** self.alpha
        return (pred_error * distance).mean()


torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 1), nn.Sigmoid())
criterion = HausdorffDTLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
img, target = torch.randn(2, 1, 8, 8), (torch.rand(2, 1, 8, 8) > 0.7).float()
loss = criterion(net(img), target)
loss.backward()
print(all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters()))
optimizer.step()
