"""vq-vae-2 ResBlock: the residual stack starts with nn.ReLU(inplace=True), which rewrites `input` before `out += input`, so the skip connection carries relu(input) instead of the pre-activation.

source: https://github.com/rosinality/vq-vae-2-pytorch/issues/60
kind: bug
symptom: silent
verified: block(x) equals conv(relu(x)) + relu(x), not conv(relu(x)) + x; the block's input tensor is changed in place
"""
import torch
from torch import nn


class ResBlock(nn.Module):
    def __init__(self, in_channel, channel):
        super().__init__()

        self.conv = nn.Sequential(
            nn.ReLU(inplace=True),  # ROOT
            nn.Conv2d(in_channel, channel, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(channel, in_channel, 1),
        )

    def forward(self, input):
        out = self.conv(input)
        out += input

        return out


class Encoder(nn.Module):
    def __init__(self, in_channel, channel, n_res_block, n_res_channel):
        super().__init__()
        blocks = [nn.Conv2d(in_channel, channel, 4, stride=2, padding=1), nn.ReLU(inplace=True),
                  nn.Conv2d(channel, channel, 3, padding=1)]
        for i in range(n_res_block):
            blocks.append(ResBlock(channel, n_res_channel))
        blocks.append(nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*blocks)

    def forward(self, input):
        return self.blocks(input)


torch.manual_seed(0)
enc = Encoder(3, 8, n_res_block=2, n_res_channel=4)
optimizer = torch.optim.Adam(enc.parameters(), lr=3e-4)
img = torch.randn(2, 3, 8, 8)
loss = enc(img).pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
