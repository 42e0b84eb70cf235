import torch
import torch.nn as nn

G = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2))
D = nn.Sequential(nn.Linear(2, 4), nn.LeakyReLU(0.2), nn.Linear(4, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
bce = nn.BCEWithLogitsLoss()


def d_step(real):
    fake = G(torch.randn(real.size(0), 2)).detach()  # ROOT
    opt_d.zero_grad()
    loss = bce(D(real), torch.ones(real.size(0), 1)) + bce(D(fake), torch.zeros(real.size(0), 1))
    loss.backward()
    opt_d.step()
    return fake


def g_step(fake):
    opt_g.zero_grad()
    loss = bce(D(fake), torch.ones(fake.size(0), 1))
    loss.backward()
    opt_g.step()


for _ in range(3):
    real = torch.randn(8, 2)
    fake = d_step(real)
    g_step(fake)  # ROOT
