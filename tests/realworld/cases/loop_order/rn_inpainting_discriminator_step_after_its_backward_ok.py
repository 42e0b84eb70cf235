"""The region-normalization inpainting trainer after its fix: the discriminator's backward and optimizer step come right after its loss, before the generator's adversarial term runs the discriminator on the prediction, so the generator loss's graph is built on the already-updated discriminator weights and both backwards succeed. The discriminator's gradients are cleared right before its backward (upstream clears them after its step, so the generator loss's gradient left in the discriminator by `g_loss.backward()` is applied by the next pass's step: a second, silent fault, left out of this look-alike).

source: https://github.com/geekyutao/RN/commit/f6667dc7cc11ace7954fa7c497883d165c71afa0
kind: lookalike
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

        model.dis_optimizer.zero_grad()
        d_loss.backward()
        model.dis_optimizer.step()

        g_fake, _ = model.discriminator(prediction)
        g_loss = model.gan_weight * model.adversarial_loss(g_fake, True)
        g_loss = g_loss + nn.functional.l1_loss(prediction, images)

        g_loss.backward()
        model.gen_optimizer.step()
        model.gen_optimizer.zero_grad()
    return d_loss.item(), g_loss.item()


if __name__ == "__main__":
    print("final losses (d, g):", train(InpaintingModel()))
