"""PyG's ARGA stores the discriminator before calling super().__init__(), so constructing the model fails.

source: https://github.com/pyg-team/pytorch_geometric/issues/681
kind: bug
symptom: crash
verified: AttributeError: cannot assign module before Module.__init__() call
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GAE(nn.Module):
    def __init__(self, encoder, decoder=None):
        super(GAE, self).__init__()
        self.encoder = encoder
        self.decoder = decoder

    def encode(self, *args, **kwargs):
        return self.encoder(*args, **kwargs)


class ARGA(GAE):
    def __init__(self, encoder, discriminator, decoder=None):
        self.discriminator = discriminator  # ROOT
        super(ARGA, self).__init__(encoder, decoder)

    def discriminator_loss(self, z):
        real = torch.sigmoid(self.discriminator(torch.randn_like(z)))
        fake = torch.sigmoid(self.discriminator(z.detach()))
        return -torch.log(real + 1e-15).mean() - torch.log(1 - fake + 1e-15).mean()


class Encoder(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(Encoder, self).__init__()
        self.lin1, self.lin2 = nn.Linear(in_channels, 2 * out_channels), nn.Linear(2 * out_channels, out_channels)

    def forward(self, x):
        return self.lin2(F.relu(self.lin1(x)))


class Discriminator(nn.Module):
    def __init__(self, in_channels):
        super(Discriminator, self).__init__()
        self.fc1, self.fc2 = nn.Linear(in_channels, 2 * in_channels), nn.Linear(2 * in_channels, 1)

    def forward(self, input):
        return self.fc2(F.relu(self.fc1(input)))


torch.manual_seed(0)
model = ARGA(Encoder(6, 4), Discriminator(4))
discriminator_optimizer = torch.optim.Adam(model.discriminator.parameters(), lr=0.001)
z = model.encode(torch.randn(10, 6))
loss = model.discriminator_loss(z)
loss.backward()
discriminator_optimizer.step()
