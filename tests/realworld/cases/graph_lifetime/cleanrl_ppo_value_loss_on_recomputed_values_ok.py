"""cleanrl's ppo_continuous_action.py after commit 5a3a0925: the rollout's values and actions are computed under torch.no_grad(), every update epoch recomputes `newvalues = vf.forward(obs[:step+1]).flatten()` for the value loss, and backward needs no retain_graph.

source: https://github.com/vwxyzjn/cleanrl/commit/5a3a092564a9fcf2cb748ca2ad23007989567f2e
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions.normal import Normal


class PointEnv:  # stands for the gym environment: move a point towards the origin
    def __init__(self, seed=1):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.pos = self.rng.uniform(-1, 1, size=3)
        return self.pos.copy()

    def step(self, action):
        self.pos = self.pos + 0.1 * np.asarray(action)
        return self.pos.copy(), -float(np.square(self.pos).sum()), False, {}


def preprocess_obs_fn(x):
    return torch.Tensor(x)


input_shape, output_shape = 3, 3
gamma, clip_coef, vf_coef, ent_coef, max_grad_norm = 0.99, 0.2, 0.5, 0.01, 0.5
episode_length, update_epochs, total_timesteps = 16, 3, 32


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.fc1 = nn.Linear(input_shape, 120)
        self.fc2 = nn.Linear(120, 84)
        self.mean = nn.Linear(84, output_shape)
        self.logstd = nn.Parameter(torch.zeros(1, output_shape))

    def forward(self, x):
        x = preprocess_obs_fn(x)
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        action_mean = self.mean(x)
        action_logstd = self.logstd.expand_as(action_mean)
        return action_mean, action_logstd

    def get_action(self, x):
        mean, logstd = self.forward(x)
        std = torch.exp(logstd)
        probs = Normal(mean, std)
        action = probs.sample()
        return action, probs.log_prob(action).sum(1)

    def get_logproba(self, x, actions):
        action_mean, action_logstd = self.forward(x)
        action_std = torch.exp(action_logstd)
        dist = Normal(action_mean, action_std)
        return dist.log_prob(actions).sum(1)


class Value(nn.Module):
    def __init__(self):
        super(Value, self).__init__()
        self.fc1 = nn.Linear(input_shape, 64)
        self.fc2 = nn.Linear(64, 1)

    def forward(self, x):
        x = preprocess_obs_fn(x)
        x = F.tanh(self.fc1(x))
        x = self.fc2(x)
        return x


torch.manual_seed(1)
env = PointEnv()
pg = Policy()
vf = Value()
optimizer = optim.Adam(list(pg.parameters()) + list(vf.parameters()), lr=7e-4)

global_step = 0
while global_step < total_timesteps:
    next_obs = np.array(env.reset())
    actions = np.empty((episode_length, output_shape))
    rewards, dones = np.zeros((2, episode_length))
    obs = np.empty((episode_length, input_shape))
    values = torch.zeros((episode_length))
    logprobs = np.zeros((episode_length,),)

    for step in range(episode_length):
        global_step += 1
        obs[step] = next_obs.copy()
        with torch.no_grad():
            values[step] = vf.forward(obs[step:step+1])
            action, logproba = pg.get_action(obs[step:step+1])
        actions[step] = action.data.numpy()[0]
        logprobs[step] = logproba.data.numpy()[0]
        next_obs, rewards[step], dones[step], _ = env.step(np.clip(action.tolist(), -1, 1)[0])
        if dones[step]:
            break

    returns = np.zeros_like(rewards)
    returns[step] = rewards[step]
    for t in reversed(range(rewards.shape[0]-1)):
        returns[t] = rewards[t] + gamma * returns[t+1] * (1-dones[t])
    advantages = returns - values.detach().cpu().numpy()

    for _ in range(update_epochs):
        newlogproba = pg.get_logproba(obs[:step+1], torch.Tensor(actions[:step+1]))
        ratio = torch.exp(newlogproba - torch.Tensor(logprobs[:step+1]))
        surrogate1 = ratio * torch.Tensor(advantages[:step+1])
        surrogate2 = ratio.clamp(1 - clip_coef, 1 + clip_coef) * torch.Tensor(advantages[:step+1])
        policy_loss = - torch.mean(torch.min(surrogate1, surrogate2))
        newvalues = vf.forward(obs[:step+1]).flatten()
        vf_loss = torch.mean((newvalues - torch.Tensor(returns[:step+1])).pow(2))
        entropy_loss = torch.mean(torch.exp(newlogproba) * newlogproba)
        total_loss = policy_loss + vf_coef * vf_loss + ent_coef * entropy_loss
        optimizer.zero_grad()
        total_loss.backward()
        nn.utils.clip_grad_norm_(list(pg.parameters()) + list(vf.parameters()), max_grad_norm)
        optimizer.step()

    print(f"global_step={global_step}, episode_reward={rewards.sum()}, value_loss={vf_loss.item():.4f}")
