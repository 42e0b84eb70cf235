"""Inpainting GAN: the discriminator's optimizer is constructed over the generator's parameters.

source: https://github.com/zhaoyuzhi/deepfillv2/pull/3
kind: bug
symptom: silent
verified: discriminator.conv.weight never changes; optimizer_d steps generator weights instead
"""
import torch
import torch.nn as nn


class GatedGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, img, mask):
        return torch.tanh(self.conv(torch.cat([img * (1 - mask), mask], 1)))


class PatchDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 1, 3, padding=1)

    def forward(self, img, mask):
        return self.conv(torch.cat([img, mask], 1))


def Trainer(opt):
    generator = GatedGenerator()
    discriminator = PatchDiscriminator()
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=opt['lr_g'], betas=(0.5, 0.999))
    optimizer_d = torch.optim.Adam(generator.parameters(), lr=opt['lr_d'], betas=(0.5, 0.999))  # ROOT
    img = torch.randn(2, 3, 8, 8)
    mask = (torch.rand(2, 1, 8, 8) > 0.5).float()
    for epoch in range(opt['epochs']):
        optimizer_d.zero_grad()
        fake = generator(img, mask)
        loss_D = torch.mean(torch.relu(1 - discriminator(img, mask))) + \
            torch.mean(torch.relu(1 + discriminator(fake.detach(), mask)))
        loss_D.backward()
        optimizer_d.step()

        optimizer_g.zero_grad()
        loss_G = -torch.mean(discriminator(generator(img, mask), mask))
        loss_G.backward()
        optimizer_g.step()
    return generator, discriminator


torch.manual_seed(0)
generator, discriminator = Trainer({'lr_g': 1e-3, 'lr_d': 1e-3, 'epochs': 5})
