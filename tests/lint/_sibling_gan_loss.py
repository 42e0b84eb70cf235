"""A GAN loss in a file of its own, for tests/lint/test_precision_unseen30a.py: one object
with a discriminator loss that detaches the fake and a generator loss
(descript-audio-codec's ``GANLoss`` shape)."""
import torch.nn as nn


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.disc = nn.Linear(2, 1)

    def discriminator_loss(self, fake, real):
        return self.disc(fake.detach()).mean() - self.disc(real).mean()

    def generator_loss(self, fake, real):
        return (fake - real).abs().mean() - self.disc(fake).mean()
