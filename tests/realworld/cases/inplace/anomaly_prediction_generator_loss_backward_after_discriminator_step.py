"""Anomaly_Prediction train.py builds the generator's total loss G_l_t (including the adversarial term through the discriminator) before training D, then runs optimizer_D.step(), which updates the discriminator weights in place, and only afterwards G_l_t.backward(), whose graph saved those weights.

source: https://github.com/feiyuhuahuo/Anomaly_Prediction/issues/11
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
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

    # Train discriminator
    optimizer_D.zero_grad()
    D_l.backward()
    optimizer_D.step()  # ROOT

    # Train generator
    optimizer_G.zero_grad()
    G_l_t.backward()  # SYMPTOM
    optimizer_G.step()
