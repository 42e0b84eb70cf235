"""GAN trained generator first: loss_d is computed on the generator output without detach, loss_g.backward(retain_graph=True) hides the shared graph, and after optim_g.step() has updated the generator in place, loss_d.backward() goes back through the generator's saved weights.

source: https://whosebug.com/question/5232549/How-does-PyTorch-s-loss-backward-work-when-retain-graph-True-is-specified
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
discriminator = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
optim_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
optim_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()

for step in range(2):
    real = torch.randn(8, 8)
    fake = generator(torch.randn(8, 4))
    # computing loss_g and loss_d...
    loss_g = bce(discriminator(fake), torch.ones(8, 1))
    loss_d = bce(discriminator(real), torch.ones(8, 1)) + bce(discriminator(fake), torch.zeros(8, 1))  # ROOT

    optim_g.zero_grad()
    loss_g.backward(retain_graph=True)
    optim_g.step()

    optim_d.zero_grad()
    loss_d.backward()  # SYMPTOM
    optim_d.step()
