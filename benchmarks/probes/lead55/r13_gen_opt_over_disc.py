"""GAN setup where the generator's optimizer is given the discriminator's parameters."""
import torch
import torch.nn as nn

torch.manual_seed(0)
Z = 4
G = nn.Sequential(nn.Linear(Z, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
opt_g = torch.optim.Adam(D.parameters(), lr=2e-4)  # ROOT
bce = nn.BCEWithLogitsLoss()
g0 = G[0].weight.detach().clone()

for it in range(20):
    real = torch.randn(32, 2) * 0.5 + 1.0
    fake = G(torch.randn(32, Z))

    d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()

    g_loss = bce(D(fake), torch.ones(32, 1))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()

print("generator moved:", not torch.equal(g0, G[0].weight))
