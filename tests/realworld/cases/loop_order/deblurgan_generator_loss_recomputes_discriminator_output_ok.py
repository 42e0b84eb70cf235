"""DeblurGAN-pytorch's generator update with the discriminator run again after the critic step: the generator's adversarial loss is built from `self.discriminator(deblurred)` computed with the updated weights, so its backward walks a fresh graph (the critic's graph, kept by `retain_graph=True`, is not reused) and the adversarial term still reaches the generator.

source: https://github.com/fourson/DeblurGAN-pytorch/commit/41696fc6c68ef2a3924dfbddc0ece69821e5678b
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


def gan_loss(network, deblurred_discriminator_out, sharp_discriminator_out=None):
    if network == "D":
        real = F.binary_cross_entropy_with_logits(sharp_discriminator_out, torch.ones_like(sharp_discriminator_out))
        fake = F.binary_cross_entropy_with_logits(deblurred_discriminator_out,
                                                  torch.zeros_like(deblurred_discriminator_out))
        return (real + fake) / 2
    return F.binary_cross_entropy_with_logits(deblurred_discriminator_out, torch.ones_like(deblurred_discriminator_out))


class Trainer:
    def __init__(self):
        self.generator = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
        self.discriminator = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                           nn.Conv2d(8, 1, 4, stride=2, padding=1))
        self.generator_optimizer = torch.optim.Adam(self.generator.parameters(), lr=1e-4)
        self.discriminator_optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=1e-4)

    def _train_epoch(self, loader, content_loss_lambda=100.0):
        for blurred, sharp in loader:
            deblurred = blurred + self.generator(blurred)
            sharp_discriminator_out = self.discriminator(sharp)
            deblurred_discriminator_out = self.discriminator(deblurred)

            self.discriminator_optimizer.zero_grad()
            discriminator_loss = gan_loss("D", deblurred_discriminator_out, sharp_discriminator_out)
            discriminator_loss.backward(retain_graph=True)
            self.discriminator_optimizer.step()

            self.generator_optimizer.zero_grad()
            adversarial_loss_g = gan_loss("G", self.discriminator(deblurred))
            content_loss_g = F.l1_loss(deblurred, sharp) * content_loss_lambda
            generator_loss = adversarial_loss_g + content_loss_g
            generator_loss.backward()
            self.generator_optimizer.step()
        return generator_loss.item(), discriminator_loss.item()


sharp = torch.rand(8, 2, 3, 16, 16)
loader = [(s + 0.1 * torch.randn_like(s), s) for s in sharp]
g_loss, d_loss = Trainer()._train_epoch(loader)
print(f"generator loss {g_loss:.3f}, discriminator loss {d_loss:.3f}")
