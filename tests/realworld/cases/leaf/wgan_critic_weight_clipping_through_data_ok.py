"""WGAN: the critic's weights are clipped after each optimizer step through p.data.clamp_ (not a gradient clip).

source: https://github.com/znxlwm/pytorch-generative-model-collections/issues/31
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class WGAN:
    def __init__(self):
        self.G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.D = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        self.G_optimizer = optim.RMSprop(self.G.parameters(), lr=5e-5)
        self.D_optimizer = optim.RMSprop(self.D.parameters(), lr=5e-5)
        self.c = 0.01
        self.n_critic = 2

    def train(self, data_loader):
        for iter, x_ in enumerate(data_loader):
            z_ = torch.rand(x_.size(0), 8)
            self.D_optimizer.zero_grad()
            D_real_loss = -torch.mean(self.D(x_))
            D_fake_loss = torch.mean(self.D(self.G(z_)))
            D_loss = D_real_loss + D_fake_loss
            D_loss.backward()
            self.D_optimizer.step()
            for p in self.D.parameters():
                p.data.clamp_(-self.c, self.c)
            if ((iter + 1) % self.n_critic) == 0:
                self.G_optimizer.zero_grad()
                G_loss = -torch.mean(self.D(self.G(z_)))
                G_loss.backward()
                self.G_optimizer.step()


torch.manual_seed(0)
gan = WGAN()
gan.train([torch.randn(8, 4) for _ in range(4)])
