import torch
from nets import Actor, Critic


class DDPGAgent:
    def __init__(self, obs=3, act=1, lr_actor=1e-3, lr_critic=1e-3):
        self.actor = Actor(obs, act)
        self.critic = Critic(obs, act)
        self.actor_optim = torch.optim.Adam(self.critic.parameters(), lr=lr_actor)  # ROOT
        self.critic_optim = torch.optim.Adam(self.critic.parameters(), lr=lr_critic)

    def update(self, s, a, r, s2):
        with torch.no_grad():
            target = r + 0.99 * self.critic(s2, self.actor(s2))
        critic_loss = (self.critic(s, a) - target).pow(2).mean()
        self.critic_optim.zero_grad()
        critic_loss.backward()
        self.critic_optim.step()

        actor_loss = -self.critic(s, self.actor(s)).mean()
        self.actor_optim.zero_grad()
        actor_loss.backward()
        self.actor_optim.step()
