"""UDIS (UnsupDIS-pytorch) homography transformer: t_s from torch.chunk is reshaped to a view and its small values are overwritten in place (t_s_flat[t_s_flat.abs() < eps] = eps); with batch size 1 the reshape is a view of a multi-output chunk and autograd refuses it.

source: https://github.com/kail8/UnsupDIS-pytorch/issues/26
kind: bug
symptom: crash
verified: is a view and is being modified inplace. This view is the output of a function that returns multiple views
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def transform(image2_tensor, H_tf):
    def _meshgrid(height, width):
        x_t = torch.mm(torch.ones(height, 1), torch.linspace(-1.0, 1.0, width).unsqueeze(0))
        y_t = torch.mm(torch.linspace(-1.0, 1.0, height).unsqueeze(1), torch.ones(1, width))
        x_t_flat = x_t.reshape(1, -1)
        y_t_flat = y_t.reshape(1, -1)
        ones = torch.ones_like(x_t_flat)
        return torch.cat([x_t_flat, y_t_flat, ones], dim=0)

    bs, nc, height, width = image2_tensor.shape
    H_tf = H_tf.reshape(-1, 3, 3).float()
    grid = _meshgrid(height, width).unsqueeze(0).expand(bs, -1, -1)
    T_g = torch.bmm(H_tf, grid)  # [bs,3,3] x [bs,3,w*h] -> [bs,3,w*h]
    x_s, y_s, t_s = torch.chunk(T_g, 3, dim=1)
    t_s_flat = t_s.reshape(-1)
    eps, maximal = 1e-2, 10.
    t_s_flat[t_s_flat.abs() < eps] = eps  # ROOT
    x_s_flat = x_s.reshape(-1) / t_s_flat
    y_s_flat = y_s.reshape(-1) / t_s_flat
    sample_grid = torch.stack([x_s_flat, y_s_flat], dim=-1).reshape(bs, height, width, 2)
    return F.grid_sample(image2_tensor, sample_grid, align_corners=True)


class HEstimator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(6, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(8, 8)

    def forward(self, img1, img2):
        offset = self.fc(self.features(torch.cat([img1, img2], 1))) * 0.01
        H = torch.cat([torch.eye(3).reshape(1, 9)[:, :8] + offset, torch.ones(offset.shape[0], 1)], dim=1)
        return transform(img2, H)


torch.manual_seed(0)
model = HEstimator()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
img1, img2 = torch.rand(1, 3, 16, 16), torch.rand(1, 3, 16, 16)
warped = model(img1, img2)
loss = F.l1_loss(warped, img1)
optimizer.zero_grad()
loss.backward()
optimizer.step()
