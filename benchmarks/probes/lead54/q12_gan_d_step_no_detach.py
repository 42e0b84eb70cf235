import torch
import torch.nn as nn

bce = nn.BCEWithLogitsLoss()


class GANTrainer:
    def __init__(self):
        self.G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=2e-4)
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=2e-4)

    def d_step(self, real, fake):
        ones, zeros = torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)
        loss = bce(self.D(real), ones) + bce(self.D(fake), zeros)  # ROOT
        self.opt_d.zero_grad()
        loss.backward()
        self.opt_d.step()

    def g_step(self, fake):
        loss = bce(self.D(fake), torch.ones(fake.size(0), 1))
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()

    def train_step(self, real):
        fake = self.G(torch.randn(real.size(0), 4))
        self.d_step(real, fake)
        self.g_step(fake)


t = GANTrainer()
for _ in range(3):
    t.train_step(torch.randn(16, 2))
