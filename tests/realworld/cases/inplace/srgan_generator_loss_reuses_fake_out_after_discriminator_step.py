"""SRGAN train.py: fake_out = netD(fake_img).mean() is computed for the discriminator loss, optimizerD.step() then updates netD's weights in place, and the generator loss reuses the same fake_out (d_loss.backward(retain_graph=True) kept its graph), so g_loss.backward() needs netD weights that have changed.

source: https://github.com/leftthomas/SRGAN/issues/89
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.optim as optim


class GeneratorLoss(nn.Module):
    def __init__(self):
        super(GeneratorLoss, self).__init__()
        self.mse_loss = nn.MSELoss()

    def forward(self, out_labels, out_images, target_images):
        adversarial_loss = torch.mean(1 - out_labels)
        image_loss = self.mse_loss(out_images, target_images)
        return image_loss + 0.001 * adversarial_loss


torch.manual_seed(0)
netG = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.PReLU(), nn.Conv2d(16, 12, 3, padding=1), nn.PixelShuffle(2))
netD = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(1),
                     nn.Flatten(), nn.Linear(16, 1), nn.Sigmoid())
generator_criterion = GeneratorLoss()
optimizerG = optim.Adam(netG.parameters())
optimizerD = optim.Adam(netD.parameters())

for data, target in [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(2)]:
    real_img = target
    z = data
    fake_img = netG(z)

    netD.zero_grad()
    real_out = netD(real_img).mean()
    fake_out = netD(fake_img).mean()
    d_loss = 1 - real_out + fake_out
    d_loss.backward(retain_graph=True)
    optimizerD.step()

    netG.zero_grad()
    g_loss = generator_criterion(fake_out, fake_img, real_img)  # ROOT
    g_loss.backward()  # SYMPTOM
    optimizerG.step()
