"""The GAN tutorial with the fix from the thread: the Discriminator's and Generator's LeakyReLU and Dropout layers are out of place, so the dropout no longer overwrites the LeakyReLU output saved for backward.

source: https://github.com/dreamgonfly/GAN-tutorial/issues/1
kind: lookalike
verified: runs; one discriminator and one generator step
"""
import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.Linear(in_features=100, out_features=256),
            nn.LeakyReLU(0.2),
            nn.Linear(in_features=256, out_features=512),
            nn.LeakyReLU(0.2),
            nn.Linear(in_features=512, out_features=28 * 28),
            nn.Tanh())

    def forward(self, inputs):
        return self.main(inputs).view(-1, 1, 28, 28)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Linear(in_features=28 * 28, out_features=512),
            nn.LeakyReLU(0.2),
            nn.Dropout(),
            nn.Linear(in_features=512, out_features=256),
            nn.LeakyReLU(0.2),
            nn.Dropout(),
            nn.Linear(in_features=256, out_features=1),
            nn.Sigmoid())

    def forward(self, inputs):
        inputs = inputs.view(-1, 28 * 28)
        return self.main(inputs)


torch.manual_seed(0)
G = Generator()
D = Discriminator()
criterion = nn.BCELoss()
G_optimizer = torch.optim.Adam(G.parameters(), lr=0.0002, betas=(0.5, 0.999))
D_optimizer = torch.optim.Adam(D.parameters(), lr=0.0002, betas=(0.5, 0.999))
real_data = torch.rand(16, 1, 28, 28) * 2 - 1
batch_size = real_data.size(0)
target_real = torch.ones(batch_size, 1)
target_fake = torch.zeros(batch_size, 1)

D_result_from_real = D(real_data)
D_loss_real = criterion(D_result_from_real, target_real)
z = torch.randn((batch_size, 100))
fake_data = G(z)
D_result_from_fake = D(fake_data.detach())
D_loss_fake = criterion(D_result_from_fake, target_fake)
D_loss = D_loss_real + D_loss_fake
D.zero_grad()
D_loss.backward()
D_optimizer.step()

z = torch.randn((batch_size, 100))
fake_data = G(z)
D_result_from_fake = D(fake_data)
G_loss = criterion(D_result_from_fake, target_real)
G.zero_grad()
G_loss.backward()
G_optimizer.step()
