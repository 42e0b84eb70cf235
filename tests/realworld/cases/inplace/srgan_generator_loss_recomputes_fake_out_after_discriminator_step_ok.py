"""SRGAN train.py in its later form (the thread asks why fake_img and fake_out are computed twice): after optimizerD.step() the generator recomputes fake_img and fake_out with the updated discriminator before g_loss.backward(), so no graph saved before the step is reused.

source: https://github.com/leftthomas/SRGAN/issues/101
kind: lookalike
verified: two iterations of the D and G updates run
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
    fake_img = netG(z)
    fake_out = netD(fake_img).mean()
    g_loss = generator_criterion(fake_out, fake_img, real_img)
    g_loss.backward()
    optimizerG.step()
