"""Video prediction GAN step in the order suggested in the thread: the generator's loss is backpropagated and G is stepped first, then the discriminator is zeroed, backpropagated on its loss (built on the detached generated frame) and stepped; no graph is used after the weights it saved were updated.

source: https://github.com/psh01087/Vid-ODE/issues/6
kind: lookalike
verified: two iterations of the G and D updates run
"""
import torch
import torch.nn as nn


def intensity_loss(gen_frames, gt_frames):
    return ((gen_frames - gt_frames) ** 2).mean()


def adversarial_loss(fake_outputs):
    return ((fake_outputs - 1) ** 2).mean() / 2


def discriminate_loss(real_outputs, fake_outputs):
    return (((real_outputs - 1) ** 2).mean() + (fake_outputs ** 2).mean()) / 2


torch.manual_seed(0)
generator = nn.Sequential(nn.Conv2d(12, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())
discriminator = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4))
optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4)
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-5)

for indice in range(2):
    clips = torch.randn(2, 15, 16, 16)
    input_frames, target_frame = clips[:, :12], clips[:, 12:]
    G_frame = generator(input_frames)
    inte_l = intensity_loss(G_frame, target_frame)
    g_l = adversarial_loss(discriminator(G_frame))
    G_l_t = 1. * inte_l + 0.05 * g_l
    D_l = discriminate_loss(discriminator(target_frame), discriminator(G_frame.detach()))

    # Train generator
    optimizer_G.zero_grad()
    G_l_t.backward()
    optimizer_G.step()

    # Train discriminator
    optimizer_D.zero_grad()
    D_l.backward()
    optimizer_D.step()
