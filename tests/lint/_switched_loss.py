"""A loss module in a file of its own, for tests/lint/test_precision_unseen29a.py: the
generator and discriminator losses of a VQ-GAN, one object switched by ``optimizer_idx``
(taming-transformers' shape); the discriminator branch detaches the reconstruction."""
import torch.nn as nn


class SwitchedLoss(nn.Module):
    def __init__(self, detach: bool = True):
        super().__init__()
        self.disc = nn.Linear(2, 1)
        self.detach = detach

    def forward(self, inputs, recons, optimizer_idx):
        if optimizer_idx == 0:
            return (inputs - recons).abs().mean() - self.disc(recons).mean()
        fake = recons.detach() if self.detach else recons
        return self.disc(fake).mean() - self.disc(inputs).mean()
