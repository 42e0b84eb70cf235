"""A region-normalization inpainting trainer computes the discriminator loss and the generator loss (whose adversarial term runs the discriminator on the prediction) first, then calls `d_loss.backward()` and `dis_optimizer.step()` before `g_loss.backward()`: the discriminator step rewrites its convolution weights in place, which the generator loss's graph saved, so the generator backward in `train` fails on the first batch.

source: https://github.com/geekyutao/RN/commit/f6667dc7cc11ace7954fa7c497883d165c71afa0
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class RegionNorm(nn.Module):
    """Normalise the known region and the hole separately (the mask picks the region)."""

    def __init__(self, channels):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(1, channels, 1, 1))
        self.beta = nn.Parameter(torch.zeros(1, channels, 1, 1))

    def forward(self, x, mask):
        out = torch.zeros_like(x)
        for region in (mask, 1 - mask):
            count = region.sum(dim=(2, 3), keepdim=True).clamp(min=1)
            mean = (x * region).sum(dim=(2, 3), keepdim=True) / count
            var = ((x - mean) ** 2 * region).sum(dim=(2, 3), keepdim=True) / count
            out = out + (x - mean) / torch.sqrt(var + 1e-5) * region
        return out * self.gamma + self.beta


class Generator(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.enc = nn.Conv2d(4, ch, 3, padding=1)
        self.rn = RegionNorm(ch)
        self.dec = nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, image, mask):
        x = torch.relu(self.rn(self.enc(torch.cat([image * (1 - mask), mask], dim=1)), mask))
        return torch.sigmoid(self.dec(x))


class Discriminator(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, ch, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(ch, 1, 4, stride=2, padding=1))

    def forward(self, x):
        logits = self.net(x)
        return torch.sigmoid(logits), logits


class InpaintingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = Generator()
        self.discriminator = Discriminator()
        self.gen_optimizer = torch.optim.Adam(self.generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
        self.dis_optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=1e-5, betas=(0.0, 0.9))
        self.gan_weight = 0.1

    def adversarial_loss(self, prob, is_real):
        target = torch.ones_like(prob) if is_real else torch.zeros_like(prob)
        return nn.functional.binary_cross_entropy(prob, target)


def make_batch(n=4, size=16):
    images = torch.rand(n, 3, size, size)
    masks = torch.zeros(n, 1, size, size)
    masks[:, :, 4:12, 4:12] = 1.0
    return images, masks


def train(model, batches=3):
    for _ in range(batches):
        images, masks = make_batch()
        prediction = model.generator(images, masks)

        d_real, _ = model.discriminator(images)
        d_fake, _ = model.discriminator(prediction.detach())
        d_loss = (model.adversarial_loss(d_real, True) + model.adversarial_loss(d_fake, False)) / 2

        g_fake, _ = model.discriminator(prediction)
        g_loss = model.gan_weight * model.adversarial_loss(g_fake, True)
        g_loss = g_loss + nn.functional.l1_loss(prediction, images)

        d_loss.backward()
        model.dis_optimizer.step()  # ROOT
        model.dis_optimizer.zero_grad()

        g_loss.backward()
        model.gen_optimizer.step()
        model.gen_optimizer.zero_grad()
    return d_loss.item(), g_loss.item()


if __name__ == "__main__":
    print("final losses (d, g):", train(InpaintingModel()))
