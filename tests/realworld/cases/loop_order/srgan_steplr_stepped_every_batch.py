"""SRGAN-PyTorch train.py: StepLR(step_size=epochs // 2, gamma=0.1) is meant per epoch but schedulerD.step() / schedulerG.step() run after every batch, so the learning rate is divided by 10 every few iterations and training stalls.

source: https://github.com/Lornatang/SRGAN-PyTorch/issues/1
kind: bug
symptom: silent
verified: after the first epoch (8 batches, epochs=4) both learning rates are 1e-4 * 0.1**4 instead of 1e-4
"""
import argparse

import torch
import torch.nn as nn
import torch.optim as optim


class Generator(nn.Module):
    def __init__(self, upscale_factor=2):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(),
                                  nn.Conv2d(8, 3 * upscale_factor ** 2, 3, padding=1), nn.PixelShuffle(upscale_factor))

    def forward(self, x):
        return torch.tanh(self.body(x))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1), nn.Sigmoid())

    def forward(self, x):
        return self.features(x)


torch.manual_seed(0)
args = argparse.Namespace(lr=1e-4, epochs=4, start_epoch=0)
netG, netD = Generator(), Discriminator()
content_criterion, adversarial_criterion = nn.MSELoss(), nn.BCELoss()
optimizerD = optim.Adam(netD.parameters(), lr=args.lr, betas=(0.9, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=args.lr, betas=(0.9, 0.999))
schedulerD = torch.optim.lr_scheduler.StepLR(optimizerD, step_size=args.epochs // 2, gamma=0.1)
schedulerG = torch.optim.lr_scheduler.StepLR(optimizerG, step_size=args.epochs // 2, gamma=0.1)
dataloader = [(torch.randn(2, 3, 8, 8), torch.randn(2, 3, 16, 16)) for _ in range(8)]
for epoch in range(args.start_epoch, 1):
    for i, (input, target) in enumerate(dataloader):
        real_label, fake_label = torch.ones(2, 1), torch.zeros(2, 1)
        netD.zero_grad()
        real_output = netD(target)
        errD_real = adversarial_criterion(real_output, real_label)
        fake = netG(input)
        fake_output = netD(fake.detach())
        errD_fake = adversarial_criterion(fake_output, fake_label)
        errD = errD_real + errD_fake
        errD.backward()
        optimizerD.step()

        netG.zero_grad()
        content_loss = content_criterion(fake, target)
        adversarial_loss = adversarial_criterion(netD(fake), real_label)
        errG = content_loss + 1e-3 * adversarial_loss
        errG.backward()
        optimizerG.step()

        # Dynamic adjustment of learning rate
        schedulerD.step()  # ROOT
        schedulerG.step()
print(optimizerG.param_groups[0]["lr"])
