"""WGAN-GP critic: the gradient of the scores w.r.t. the interpolates is taken without create_graph.

source: https://github.com/ooples/AiDotNet/issues/1844
kind: bug
symptom: silent
verified: gp.requires_grad is False: the penalty adds nothing to the critic's gradients
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
generator = nn.Sequential(nn.Linear(4, 6))
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
lambda_gp = 10.0


def compute_gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1)
    interpolated = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(interpolated)
    summed_scores = scores.sum()
    gradients = torch.autograd.grad(summed_scores, interpolated)[0]  # ROOT
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


real = torch.randn(8, 6)
fake = generator(torch.randn(8, 4)).detach()
wasserstein = critic(fake).mean() - critic(real).mean()
gp = compute_gradient_penalty(critic, real, fake)
critic_loss = wasserstein + lambda_gp * gp
critic_opt.zero_grad()
critic_loss.backward()
critic_opt.step()
print(gp.item(), gp.requires_grad)
