"""Look-alike of r10: the penalty's gradient is built with create_graph=True."""
import torch
import torch.nn as nn


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    grads = torch.autograd.grad(scores, mixed, grad_outputs=torch.ones_like(scores), create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
    for _ in range(5):
        real = torch.randn(32, 2) + 2
        fake = gen(torch.randn(32, 4)).detach()
        loss = critic(fake).mean() - critic(real).mean() + 10.0 * gradient_penalty(critic, real, fake)
        opt_c.zero_grad()
        loss.backward()
        opt_c.step()
