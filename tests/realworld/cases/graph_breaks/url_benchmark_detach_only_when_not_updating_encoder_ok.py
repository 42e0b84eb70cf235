"""URLB ICM-APT agent without the second detach: obs and next_obs are detached only when update_encoder is False, so with update_encoder=True the critic loss trains the pixel encoder.

source: https://github.com/rll-research/url_benchmark/issues/16
kind: lookalike
verified: with update_encoder=True encoder.convnet[0].weight gets a gradient (max abs 0.0092) and moves 0.0010
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=1), nn.ReLU())

    def forward(self, obs):
        return self.convnet(obs - 0.5).flatten(1)


class Critic(nn.Module):
    def __init__(self, repr_dim, action_dim):
        super().__init__()
        self.q = nn.Sequential(nn.Linear(repr_dim + action_dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, obs, action):
        return self.q(torch.cat([obs, action], dim=-1))


class ICMAPTAgent:
    def __init__(self, update_encoder=True, action_dim=2):
        self.update_encoder = update_encoder
        self.encoder = Encoder()
        repr_dim = self.encoder(torch.zeros(1, 3, 16, 16)).shape[1]
        self.critic = Critic(repr_dim, action_dim)
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=1e-3)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def update_critic(self, obs, action, reward, next_obs):
        with torch.no_grad():
            target_Q = reward + 0.99 * self.critic(next_obs, action)
        critic_loss = F.mse_loss(self.critic(obs, action), target_Q)
        if self.encoder_opt is not None:
            self.encoder_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        if self.encoder_opt is not None:
            self.encoder_opt.step()
        return critic_loss.item()

    def update(self, obs, action, reward, next_obs):
        obs = self.encoder(obs)
        next_obs = self.encoder(next_obs)
        if not self.update_encoder:
            obs = obs.detach()
            next_obs = next_obs.detach()
        return self.update_critic(obs, action, reward, next_obs)


torch.manual_seed(0)
agent = ICMAPTAgent(update_encoder=True)
before = agent.encoder.convnet[0].weight.detach().clone()
obs, next_obs = torch.rand(8, 3, 16, 16), torch.rand(8, 3, 16, 16)
action, reward = torch.rand(8, 2), torch.rand(8, 1)
agent.update(obs, action, reward, next_obs)
grad = agent.encoder.convnet[0].weight.grad
print(None if grad is None else grad.abs().max().item(),
      (agent.encoder.convnet[0].weight - before).abs().max().item())
