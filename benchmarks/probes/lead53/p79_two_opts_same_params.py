import torch
import torch.nn as nn

G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(G.parameters(), lr=1e-3)  # ROOT
bce = nn.BCEWithLogitsLoss()
for _ in range(3):
    real = torch.randn(8, 2)
    fake = G(torch.randn(8, 2))
    opt_d.zero_grad()
    d_loss = bce(D(real), torch.ones(8, 1)) + bce(D(fake.detach()), torch.zeros(8, 1))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = bce(D(fake), torch.ones(8, 1))
    g_loss.backward()
    opt_g.step()
