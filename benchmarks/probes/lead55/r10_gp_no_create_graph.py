"""WGAN-GP critic step: the gradient penalty is taken without create_graph, so it trains nothing."""
import torch
import torch.nn as nn


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    grads = torch.autograd.grad(scores, mixed, grad_outputs=torch.ones_like(scores))[0]  # ROOT
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def critic_step(critic, gen, opt_c, real, z_dim=4, lam=10.0):
    fake = gen(torch.randn(real.size(0), z_dim)).detach()
    loss = critic(fake).mean() - critic(real).mean() + lam * gradient_penalty(critic, real, fake)
    opt_c.zero_grad()
    loss.backward()
    opt_c.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
    for _ in range(5):
        critic_step(critic, gen, opt_c, torch.randn(32, 2) + 2)
