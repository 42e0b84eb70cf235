"""Discriminator block: LeakyReLU(inplace=True) followed by Dropout(inplace=True) on the same tensor.

source: https://github.com/pytorch/pytorch/issues/72992
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Discriminator(nn.Module):
    def __init__(self, nc=3, ndf=8):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Dropout(0.25, inplace=True),  # ROOT
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Flatten(),
            nn.Linear(ndf * 2 * 4 * 4, 1),
        )

    def forward(self, x):
        return self.main(x)


netD = Discriminator()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()
real = torch.randn(4, 3, 16, 16)
output = netD(real).view(-1)
errD_real = criterion(output, torch.ones(4))
optimizerD.zero_grad()
errD_real.backward()  # SYMPTOM
optimizerD.step()
