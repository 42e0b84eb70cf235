import torch
import torch.nn.functional as F


def d_loss(G, D, z, real):
    fake = G(z).detach()
    lr, lf = D(real), D(fake)
    return F.binary_cross_entropy_with_logits(lr, torch.ones_like(lr)) + \
        F.binary_cross_entropy_with_logits(lf, torch.zeros_like(lf))


def g_loss(G, D, z):
    fake = G(z).detach()  # ROOT
    logits = D(fake)
    return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
