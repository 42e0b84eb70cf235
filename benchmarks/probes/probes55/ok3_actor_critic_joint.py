import torch
import torch.nn as nn
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self, obs=4, act=2):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs, 32), nn.Tanh())
        self.pi = nn.Linear(32, act)
        self.v = nn.Linear(32, 1)

    def forward(self, s):
        h = self.trunk(s)
        return Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)


ac = ActorCritic()
actor_opt = torch.optim.Adam(list(ac.trunk.parameters()) + list(ac.pi.parameters()), lr=3e-4)
critic_opt = torch.optim.Adam(ac.v.parameters(), lr=1e-3)

for update in range(3):
    states = torch.randn(16, 4)
    dist, values = ac(states)
    actions = dist.sample()
    returns = torch.randn(16)
    advantage = returns - values
    critic_loss = advantage.pow(2).mean()
    actor_loss = -(dist.log_prob(actions) * advantage.detach()).mean()
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    (actor_loss + 0.5 * critic_loss).backward()
    actor_opt.step()
    critic_opt.step()
