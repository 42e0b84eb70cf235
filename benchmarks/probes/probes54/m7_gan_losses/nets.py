import torch.nn as nn


def generator(z_dim=8):
    return nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, 4))


def discriminator():
    return nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
