"""Pytorch-UNet AMP loop: clip_grad_norm_ runs on the scaled gradients (no grad_scaler.unscale_ first), so the clip threshold is applied 65536x too early and the real gradient shrinks to ~1/65536 of the limit.

source: https://github.com/milesial/Pytorch-UNet/issues/468
kind: bug
symptom: silent
verified: after grad_scaler.step the unscaled gradient norm is ~1.5e-5 (gradient_clipping / scale) instead of min(true norm, 1.0)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(n_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.outc = nn.Conv2d(8, n_classes, kernel_size=1)

    def forward(self, x):
        return self.outc(self.inc(x))


def dice_loss(input, target, eps=1e-6):
    inter = 2 * (input * target).sum(dim=(-1, -2))
    sets_sum = input.sum(dim=(-1, -2)) + target.sum(dim=(-1, -2))
    return 1 - ((inter + eps) / (sets_sum + eps)).mean()


torch.manual_seed(0)
device = torch.device('cpu')
amp = True
gradient_clipping = 1.0
model = UNet(n_channels=3, n_classes=1)
optimizer = optim.RMSprop(model.parameters(), lr=1e-5, weight_decay=1e-8, momentum=0.999, foreach=True)
grad_scaler = torch.amp.GradScaler('cpu', enabled=amp)
criterion = nn.BCEWithLogitsLoss()
images, true_masks = torch.randn(2, 3, 16, 16), torch.randint(0, 2, (2, 1, 16, 16)).float()
for epoch in range(2):
    model.train()
    with torch.autocast(device.type, enabled=amp, dtype=torch.bfloat16):
        masks_pred = model(images)
        loss = criterion(masks_pred.float(), true_masks)
        loss += dice_loss(F.sigmoid(masks_pred.float()), true_masks)
    optimizer.zero_grad(set_to_none=True)
    grad_scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)  # ROOT
    grad_scaler.step(optimizer)
    grad_scaler.update()
