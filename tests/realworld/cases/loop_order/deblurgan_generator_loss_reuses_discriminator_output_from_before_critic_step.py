"""DeblurGAN-pytorch's `Trainer._train_epoch` runs the discriminator once on the deblurred batch (`deblurred_discriminator_out`), uses that output for the critic update (`discriminator_loss.backward(retain_graph=True)` then `discriminator_optimizer.step()`), and then builds the generator's adversarial loss from the same output: the critic step has rewritten in place the discriminator weights that this graph saved, so `generator_loss.backward()` fails on recent PyTorch (the commit then detached the adversarial term, which silently drops it; the look-alike recomputes the discriminator output after the critic step instead).

source: https://github.com/fourson/DeblurGAN-pytorch/commit/41696fc6c68ef2a3924dfbddc0ece69821e5678b
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [1, 8, 4, 4]] is at version 2; expected version 1 instead
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
            adversarial_loss_g = gan_loss("G", deblurred_discriminator_out)  # ROOT
            content_loss_g = F.l1_loss(deblurred, sharp) * content_loss_lambda
            generator_loss = adversarial_loss_g + content_loss_g
            generator_loss.backward()
            self.generator_optimizer.step()
        return generator_loss.item(), discriminator_loss.item()


sharp = torch.rand(8, 2, 3, 16, 16)
loader = [(s + 0.1 * torch.randn_like(s), s) for s in sharp]
g_loss, d_loss = Trainer()._train_epoch(loader)
print(f"generator loss {g_loss:.3f}, discriminator loss {d_loss:.3f}")
