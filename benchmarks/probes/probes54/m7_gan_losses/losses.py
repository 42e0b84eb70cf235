import torch
import torch.nn.functional as F


def discriminator_loss(D, real, fake):
    real_logits = D(real)
    fake_logits = D(fake)  # ROOT
    return (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
            + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))


def generator_loss(D, fake):
    logits = D(fake)
    return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
