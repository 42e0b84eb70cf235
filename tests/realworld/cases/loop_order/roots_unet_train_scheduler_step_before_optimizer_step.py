"""segmentation_of_roots_in_soil_with_unet's train loop steps the LR scheduler before optimizer.step() in each iteration, so the first optimizer step already uses the second learning rate of the schedule and the whole schedule runs one step early (the warning "Detected call of `lr_scheduler.step()` before `optimizer.step()`").

source: https://github.com/Abe404/segmentation_of_roots_in_soil_with_unet/pull/4
kind: bug
symptom: silent
verified: with CosineAnnealingLR(lr=0.01, T_max=8) the 8 optimizer steps use lr 0.00962, 0.00854, 0.00691, 0.005, 0.00309, 0.00146, 0.00038, 0.0 (the last step does nothing); with the scheduler stepped after the optimizer they use 0.01, 0.00962, ..., 0.00038
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class UNetGNRes(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GroupNorm(4, 16), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.conv_out = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        x1 = self.conv_in(x)
        x2 = self.up(self.down(x1))
        return self.conv_out(torch.cat([x1, x2], dim=1))


torch.manual_seed(0)
cnn = UNetGNRes()
optimizer = torch.optim.SGD(cnn.parameters(), lr=0.01, momentum=0.99, nesterov=True)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=8)
photos = torch.randn(8, 4, 3, 32, 32)
masks = torch.randint(0, 2, (8, 4, 32, 32))
cnn.train()
for photo_tiles, foreground_tiles in zip(photos, masks):
    optimizer.zero_grad()
    outputs = cnn(photo_tiles)
    loss = F.cross_entropy(outputs, foreground_tiles)
    loss.backward()
    scheduler.step()  # ROOT
    optimizer.step()
