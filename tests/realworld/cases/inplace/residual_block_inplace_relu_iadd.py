"""Content-weighted image compression: a residual block adds the shortcut into an in-place ReLU output.

source: https://github.com/pytorch/pytorch/issues/5687
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ResidualBlock(nn.Module):
    def __init__(self, ch_in, ch_out, shortcut=None):
        super().__init__()
        self.left = nn.Sequential(
            nn.Conv2d(ch_in, 8, 3, 1, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(8, ch_out, 3, 1, 1),
            nn.ReLU(inplace=True),
        )
        self.right = shortcut

    def forward(self, x):
        out = self.left(x)
        residual = x if self.right is None else self.right(x)
        out += residual  # ROOT
        return F.relu(out, inplace=False)


model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), ResidualBlock(4, 4))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
img = torch.randn(2, 3, 8, 8)
loss = F.mse_loss(model(img), torch.randn(2, 4, 8, 8))
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
