"""bentrevett's pytorch-rl actor-critic notebook as revised after the issue: the policy loss weights the log-probabilities by the advantage `returns - values.detach()`, so the critic acts as the baseline of the actor's update.

source: https://github.com/bentrevett/pytorch-rl/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.fc_1 = nn.Linear(input_dim, hidden_dim)
        self.fc_2 = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        return self.fc_2(F.relu(self.fc_1(x)))


class ActorCritic(nn.Module):
    def __init__(self, actor, critic):
        super().__init__()
        self.actor = actor
        self.critic = critic

    def forward(self, state):
        return self.actor(state), self.critic(state)


def calculate_returns(rewards, discount_factor, normalize=False):
    returns, R = [], 0
    for r in reversed(rewards):
        R = r + R * discount_factor
        returns.insert(0, R)
    return torch.tensor(returns)


def update_policy(returns, log_prob_actions, values, optimizer):
    returns = returns.detach()
    advantages = returns - values.detach()
    policy_loss = - (advantages * log_prob_actions).sum()
    value_loss = F.smooth_l1_loss(returns, values).sum()
    optimizer.zero_grad()
    policy_loss.backward()
    value_loss.backward()
    optimizer.step()
    return policy_loss.item(), value_loss.item()


torch.manual_seed(0)
policy = ActorCritic(MLP(4, 32, 2), MLP(4, 32, 1))
optimizer = torch.optim.Adam(policy.parameters(), lr=0.01)
states = torch.randn(20, 4)
log_prob_actions, values, rewards = [], [], []
for state in states:
    action_pred, value_pred = policy(state.unsqueeze(0))
    dist = torch.distributions.Categorical(logits=action_pred)
    action = dist.sample()
    log_prob_actions.append(dist.log_prob(action))
    values.append(value_pred)
    rewards.append(1.0)
log_prob_actions = torch.cat(log_prob_actions)
values = torch.cat(values).squeeze(-1)
returns = calculate_returns(rewards, 0.99)
policy_loss, value_loss = update_policy(returns, log_prob_actions, values, optimizer)
