"""main.py passes (netG_s, netG) to train(), so the loop trains the EMA copy the optimizer does not hold.

source: https://github.com/wilile26811249/ViTGAN/issues/5
kind: bug
symptom: silent
verified: netG.fc.weight.grad is None after training; optimizer_g never applies a gradient
"""
import copy
import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, z):
        return torch.tanh(self.fc(z))


def train(netG, netG_s, netD, optimizer_g, optimizer_d, data, epochs=3):
    for _ in range(epochs):
        z = torch.randn(data.shape[0], 4)
        optimizer_d.zero_grad()
        loss_d = torch.relu(1 - netD(data)).mean() + torch.relu(1 + netD(netG(z).detach())).mean()
        loss_d.backward()
        optimizer_d.step()

        optimizer_g.zero_grad()
        loss_g = -netD(netG(z)).mean()
        loss_g.backward()
        optimizer_g.step()
        with torch.no_grad():
            for p_s, p in zip(netG_s.parameters(), netG.parameters()):
                p_s.mul_(0.999).add_(p, alpha=0.001)


torch.manual_seed(0)
netG = Generator()
netG_s = copy.deepcopy(netG)
netD = nn.Linear(8, 1)
optimizer_g = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.0, 0.99))
optimizer_d = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.0, 0.99))
data = torch.randn(8, 8)
train(netG_s, netG, netD, optimizer_g, optimizer_d, data)  # ROOT
