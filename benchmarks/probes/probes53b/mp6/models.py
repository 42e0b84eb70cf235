import torch.nn as nn


def make_gan(z_dim=8, x_dim=4):
    G = nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, x_dim))
    D = nn.Sequential(nn.Linear(x_dim, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    return G, D
