"""The CIC update encoded as in the DDPG base agent: obs is encoded with gradients on (the critic loss trains the encoder through encoder_opt) and only next_obs, which feeds the target, is encoded under torch.no_grad().

source: https://github.com/rll-research/cic/issues/5
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=1), nn.ReLU())
        self.repr_dim = 8 * 5 * 5

    def forward(self, obs):
        return self.convnet(obs / 255.0 - 0.5).flatten(1)


class Actor(nn.Module):
    def __init__(self, obs_dim, action_dim, hidden_dim):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, action_dim))

    def forward(self, obs):
        return torch.tanh(self.policy(obs))


class Critic(nn.Module):
    def __init__(self, obs_dim, action_dim, hidden_dim):
        super().__init__()
        self.Q1 = nn.Sequential(nn.Linear(obs_dim + action_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 1))

    def forward(self, obs, action):
        return self.Q1(torch.cat([obs, action], dim=-1))


class CICAgent:
    def __init__(self, skill_dim=4, action_dim=2, hidden_dim=32, lr=1e-3):
        self.skill_dim = skill_dim
        self.encoder = Encoder()
        obs_dim = self.encoder.repr_dim + skill_dim
        self.actor = Actor(obs_dim, action_dim, hidden_dim)
        self.critic = Critic(obs_dim, action_dim, hidden_dim)
        self.critic_target = Critic(obs_dim, action_dim, hidden_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)

    def aug_and_encode(self, obs):
        return self.encoder(obs)

    def update_critic(self, obs, action, reward, discount, next_obs):
        with torch.no_grad():
            target_Q = reward + discount * self.critic_target(next_obs, self.actor(next_obs))
        critic_loss = F.mse_loss(self.critic(obs, action), target_Q)
        self.critic_opt.zero_grad(set_to_none=True)
        self.encoder_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        return critic_loss.item()

    def update_actor(self, obs):
        actor_loss = -self.critic(obs, self.actor(obs)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

    def update(self, batch):
        obs, action, extr_reward, discount, next_obs, skill = batch
        obs = self.aug_and_encode(obs)
        with torch.no_grad():
            next_obs = self.aug_and_encode(next_obs)
        reward = extr_reward
        obs = torch.cat([obs, skill], dim=1)
        next_obs = torch.cat([next_obs, skill], dim=1)
        critic_loss = self.update_critic(obs, action, reward, discount, next_obs)
        self.update_actor(obs.detach())
        return critic_loss


torch.manual_seed(0)
agent = CICAgent()
w0 = agent.encoder.convnet[0].weight.detach().clone()
for step in range(30):
    batch = (torch.randint(0, 256, (16, 3, 15, 15)).float(), torch.rand(16, 2) * 2 - 1, torch.randn(16, 1) * 0.1,
             torch.full((16, 1), 0.99), torch.randint(0, 256, (16, 3, 15, 15)).float(), torch.rand(16, 4))
    critic_loss = agent.update(batch)
print("encoder moved", (agent.encoder.convnet[0].weight.detach() - w0).abs().max().item(),
      "encoder grad", agent.encoder.convnet[0].weight.grad is not None, "critic loss", critic_loss)
