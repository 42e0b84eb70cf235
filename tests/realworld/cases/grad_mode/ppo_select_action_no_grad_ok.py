"""PPO: select_action runs the old policy under torch.no_grad(); update() re-evaluates with grad.

source: https://github.com/nikhilbarhate99/PPO-PyTorch/issues/63
kind: lookalike
verified: the actor and critic weights get gradients in update()
"""
import torch
import torch.nn as nn
from torch.distributions import Categorical

torch.manual_seed(0)


class ActorCritic(nn.Module):
    def __init__(self, state_dim=4, action_dim=2):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(state_dim, 16), nn.Tanh(), nn.Linear(16, action_dim),
                                   nn.Softmax(dim=-1))
        self.critic = nn.Sequential(nn.Linear(state_dim, 16), nn.Tanh(), nn.Linear(16, 1))

    def act(self, state):
        dist = Categorical(self.actor(state))
        action = dist.sample()
        return action.detach(), dist.log_prob(action).detach()

    def evaluate(self, state, action):
        dist = Categorical(self.actor(state))
        return dist.log_prob(action), self.critic(state).squeeze(-1), dist.entropy()


class PPO:
    def __init__(self, eps_clip=0.2):
        self.policy, self.policy_old = ActorCritic(), ActorCritic()
        self.policy_old.load_state_dict(self.policy.state_dict())
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.eps_clip, self.states, self.actions, self.logprobs = eps_clip, [], [], []

    def select_action(self, state):
        with torch.no_grad():
            action, logprob = self.policy_old.act(state)
        self.states.append(state)
        self.actions.append(action)
        self.logprobs.append(logprob)
        return action.item()

    def update(self, rewards):
        old_states, old_actions = torch.stack(self.states), torch.stack(self.actions)
        old_logprobs = torch.stack(self.logprobs)
        logprobs, values, entropy = self.policy.evaluate(old_states, old_actions)
        advantages = rewards - values.detach()
        ratios = torch.exp(logprobs - old_logprobs)
        surr = torch.min(ratios * advantages,
                         torch.clamp(ratios, 1 - self.eps_clip, 1 + self.eps_clip) * advantages)
        loss = -surr + 0.5 * (values - rewards) ** 2 - 0.01 * entropy
        self.optimizer.zero_grad()
        loss.mean().backward()
        self.optimizer.step()


ppo = PPO()
for t in range(5):
    ppo.select_action(torch.randn(4))
ppo.update(torch.randn(5))
print(all(p.grad is not None for p in ppo.policy.parameters()))
