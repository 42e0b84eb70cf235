"""PPO-PyTorch update: ratios = torch.exp(logprobs - old_logprobs.detach()) keeps the graph through the new log-probabilities, which the clipped surrogate needs, and the extra .detach() on old_logprobs (already detached when stored) is harmless; detaching the ratios, as the issue asked, would have been the bug.

source: https://github.com/nikhilbarhate99/PPO-PyTorch/issues/18
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self, state_dim=4, action_dim=2, n_latent_var=32):
        super(ActorCritic, self).__init__()
        self.action_layer = nn.Sequential(nn.Linear(state_dim, n_latent_var), nn.Tanh(),
                                          nn.Linear(n_latent_var, action_dim), nn.Softmax(dim=-1))
        self.value_layer = nn.Sequential(nn.Linear(state_dim, n_latent_var), nn.Tanh(), nn.Linear(n_latent_var, 1))

    def act(self, state, memory):
        action_probs = self.action_layer(state)
        dist = Categorical(action_probs)
        action = dist.sample()
        memory.states.append(state)
        memory.actions.append(action)
        memory.logprobs.append(dist.log_prob(action))
        return action.item()

    def evaluate(self, state, action):
        dist = Categorical(self.action_layer(state))
        return dist.log_prob(action), torch.squeeze(self.value_layer(state)), dist.entropy()


class Memory:
    def __init__(self):
        self.actions, self.states, self.logprobs, self.rewards = [], [], [], []


torch.manual_seed(0)
policy = ActorCritic()
policy_old = ActorCritic()
policy_old.load_state_dict(policy.state_dict())
optimizer = torch.optim.Adam(policy.parameters(), lr=0.002, betas=(0.9, 0.999))
MseLoss = nn.MSELoss()
memory = Memory()
for t in range(16):
    policy_old.act(torch.randn(4), memory)
    memory.rewards.append(float(torch.rand(())))

rewards = torch.tensor(memory.rewards)
rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-5)
old_states = torch.stack(memory.states).detach()
old_actions = torch.stack(memory.actions).detach()
old_logprobs = torch.stack(memory.logprobs).detach()
for _ in range(4):
    logprobs, state_values, dist_entropy = policy.evaluate(old_states, old_actions)
    ratios = torch.exp(logprobs - old_logprobs.detach())
    advantages = rewards - state_values.detach()
    surr1 = ratios * advantages
    surr2 = torch.clamp(ratios, 1 - 0.2, 1 + 0.2) * advantages
    loss = -torch.min(surr1, surr2) + 0.5 * MseLoss(state_values, rewards) - 0.01 * dist_entropy
    optimizer.zero_grad()
    loss.mean().backward()
    optimizer.step()
policy_old.load_state_dict(policy.state_dict())
print(loss.mean().item())
