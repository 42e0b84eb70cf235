"""WaveGAN-pytorch's training loop with the fix given in the issue thread: one = torch.tensor(1, dtype=torch.float) is 0-dim like the averaged discriminator outputs, so D_real.backward(neg_one), D_fake.backward(one) and the gradient-penalty backward accept it as their gradient.

source: https://github.com/mazzzystar/WaveGAN-pytorch/issues/9
kind: lookalike
"""
import torch
import torch.nn as nn
from torch import autograd, optim


class WaveGANGenerator(nn.Module):
    def __init__(self, latent_dim=16, model_size=8):
        super().__init__()
        self.fc1 = nn.Linear(latent_dim, 4 * model_size * 64)
        self.deconv = nn.ConvTranspose1d(4 * model_size, 1, 25, stride=4, padding=11, output_padding=1)
        self.model_size = model_size

    def forward(self, x):
        x = torch.relu(self.fc1(x)).view(-1, 4 * self.model_size, 64)
        return torch.tanh(self.deconv(x))


class WaveGANDiscriminator(nn.Module):
    def __init__(self, model_size=8):
        super().__init__()
        self.conv = nn.Conv1d(1, model_size, 25, stride=4, padding=11)
        self.fc1 = nn.Linear(model_size * 64, 1)

    def forward(self, x):
        x = nn.functional.leaky_relu(self.conv(x), 0.2)
        return self.fc1(x.flatten(1))


def calc_gradient_penalty(netD, real_data, fake_data, batch_size, lmbda):
    alpha = torch.rand(batch_size, 1, 1).expand(real_data.size())
    interpolates = (alpha * real_data + (1 - alpha) * fake_data).requires_grad_(True)
    disc_interpolates = netD(interpolates)
    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return lmbda * ((gradients.norm(2, dim=1) - 1) ** 2).mean()


torch.manual_seed(0)
batch_size, latent_dim, lmbda = 8, 16, 10.0
netG, netD = WaveGANGenerator(latent_dim), WaveGANDiscriminator()
optimizerG = optim.Adam(netG.parameters(), lr=1e-4, betas=(0.5, 0.9))
optimizerD = optim.Adam(netD.parameters(), lr=1e-4, betas=(0.5, 0.9))
D_cost_train_epoch = []
for i in range(1, 4):
    for p in netD.parameters():
        p.requires_grad = True
    one = torch.tensor(1, dtype=torch.float)
    neg_one = one * -1
    for iter_dis in range(5):
        netD.zero_grad()
        noise = torch.Tensor(batch_size, latent_dim).uniform_(-1, 1)
        real_data_Var = torch.sin(torch.linspace(0, 60, 256)).expand(batch_size, 1, 256) * torch.rand(batch_size, 1, 1)
        D_real = netD(real_data_Var)
        D_real = D_real.mean()
        D_real.backward(neg_one)
        fake = netG(noise).detach()
        D_fake = netD(fake).mean()
        D_fake.backward(one)
        gradient_penalty = calc_gradient_penalty(netD, real_data_Var, fake, batch_size, lmbda)
        gradient_penalty.backward(one)
        D_cost_train = D_fake - D_real + gradient_penalty
        optimizerD.step()
        D_cost_train_epoch.append(D_cost_train.item())
    for p in netD.parameters():
        p.requires_grad = False
    netG.zero_grad()
    G = netD(netG(torch.Tensor(batch_size, latent_dim).uniform_(-1, 1))).mean()
    G.backward(neg_one)
    optimizerG.step()
print("D cost", D_cost_train_epoch[0], "->", D_cost_train_epoch[-1])
