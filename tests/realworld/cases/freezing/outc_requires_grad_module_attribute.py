"""Source-free adaptation freezes the last layer with `self.model.outc.requires_grad = False`; it still trains.

source: https://github.com/CSCYQJ/MICCAI23-ProtoContra-SFDA/issues/18
kind: bug
symptom: silent
verified: trainer.model.outc.conv.weight changes although outc was meant to be frozen
"""
import torch
import torch.nn as nn


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_classes=2):
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
        self.outc = OutConv(4, n_classes)

    def forward(self, x):
        return self.outc(self.inc(x))


class Trainer:
    def __init__(self):
        self.model = UNet()
        self.model.outc.requires_grad = False  # ROOT
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def train_step(self, img, pseudo_label):
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(img), pseudo_label)
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
trainer = Trainer()
img = torch.randn(2, 1, 8, 8)
pseudo_label = torch.randint(0, 2, (2, 8, 8))
for _ in range(5):
    trainer.train_step(img, pseudo_label)
