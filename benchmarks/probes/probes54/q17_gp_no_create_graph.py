import torch
import torch.nn as nn


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    (grads,) = torch.autograd.grad(scores.sum(), mixed)  # ROOT
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


critic = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
real, fake = torch.randn(8, 4), torch.randn(8, 4)
gp = gradient_penalty(critic, real, fake)
loss = critic(fake).mean() - critic(real).mean() + 10.0 * gp
opt.zero_grad()
loss.backward()
opt.step()
print("penalty reaches the critic:", gp.requires_grad)
