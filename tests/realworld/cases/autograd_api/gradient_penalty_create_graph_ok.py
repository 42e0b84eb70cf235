"""WGAN-GP critic: the gradient penalty built with create_graph=True, so it trains the critic.

source: https://nn.labml.ai/gan/wasserstein/gradient_penalty/index.html
kind: lookalike
verified: the penalty has a graph and every critic parameter gets a gradient
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GradientPenalty(nn.Module):
    def forward(self, x, f):
        batch_size = x.shape[0]
        gradients, *_ = torch.autograd.grad(outputs=f, inputs=x,
                                            grad_outputs=f.new_ones(f.shape), create_graph=True)
        gradients = gradients.reshape(batch_size, -1)
        norm = gradients.norm(2, dim=-1)
        return torch.mean((norm - 1) ** 2)


critic = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
gradient_penalty = GradientPenalty()
real = torch.randn(8, 6).requires_grad_()
fake = torch.randn(8, 6)
f_real = critic(real)
loss = critic(fake).mean() - f_real.mean() + 10.0 * gradient_penalty(real, f_real)
critic_opt.zero_grad()
loss.backward()
critic_opt.step()
print(all(p.grad is not None for p in critic.parameters()))
