"""In this soft actor-critic agent, `learn()` computes the policy loss (through the twin critics) together with the critic losses, then `update_params` steps the two Q-networks, which changes their weights in place, before it backpropagates the policy loss: the policy loss's graph saved the old critic weights, and with PyTorch >= 1.5 the policy update fails inside `update_params`.

source: https://github.com/toshikwa/soft-actor-critic.pytorch/issues/1
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Normal
from torch.optim import Adam


def update_params(optim, network, loss, grad_clip=None, retain_graph=False):
    optim.zero_grad()
    loss.backward(retain_graph=retain_graph)  # SYMPTOM
    if grad_clip is not None:
        for p in network.modules():
            torch.nn.utils.clip_grad_norm_(p.parameters(), grad_clip)
    optim.step()


def mlp(inp, out, hidden=32):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, out))


class TwinnedQNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super().__init__()
        self.Q1 = mlp(num_inputs + num_actions, 1)
        self.Q2 = mlp(num_inputs + num_actions, 1)

    def forward(self, states, actions):
        x = torch.cat([states, actions], dim=1)
        return self.Q1(x), self.Q2(x)


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super().__init__()
        self.net = mlp(num_inputs, 2 * num_actions)

    def sample(self, states):
        mean, log_std = self.net(states).chunk(2, dim=-1)
        normals = Normal(mean, log_std.clamp(-20, 2).exp())
        xs = normals.rsample()
        actions = torch.tanh(xs)
        log_probs = normals.log_prob(xs) - torch.log(1 - actions.pow(2) + 1e-6)
        entropies = -log_probs.sum(dim=1, keepdim=True)
        return actions, entropies, torch.tanh(mean)


class SacAgent:
    def __init__(self, num_inputs, num_actions, lr=3e-4, gamma=0.99, grad_clip=None):
        self.policy = GaussianPolicy(num_inputs, num_actions)
        self.critic = TwinnedQNetwork(num_inputs, num_actions)
        self.critic_target = TwinnedQNetwork(num_inputs, num_actions)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.policy_optim = Adam(self.policy.parameters(), lr=lr)
        self.q1_optim = Adam(self.critic.Q1.parameters(), lr=lr)
        self.q2_optim = Adam(self.critic.Q2.parameters(), lr=lr)
        self.target_entropy = -float(num_actions)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha = self.log_alpha.exp()
        self.alpha_optim = Adam([self.log_alpha], lr=lr)
        self.gamma, self.grad_clip = gamma, grad_clip

    def calc_critic_loss(self, batch, weights):
        states, actions, rewards, next_states, dones = batch
        curr_q1, curr_q2 = self.critic(states, actions)
        with torch.no_grad():
            next_actions, next_entropies, _ = self.policy.sample(next_states)
            next_q1, next_q2 = self.critic_target(next_states, next_actions)
            next_q = torch.min(next_q1, next_q2) + self.alpha * next_entropies
            target_q = rewards + (1.0 - dones) * self.gamma * next_q
        q1_loss = torch.mean((curr_q1 - target_q).pow(2) * weights)
        q2_loss = torch.mean((curr_q2 - target_q).pow(2) * weights)
        return q1_loss, q2_loss

    def calc_policy_loss(self, batch, weights):
        states = batch[0]
        sampled_action, entropy, _ = self.policy.sample(states)
        q1, q2 = self.critic(states, sampled_action)
        q = torch.min(q1, q2)
        policy_loss = torch.mean((-q - self.alpha * entropy) * weights)
        return policy_loss, entropy

    def calc_entropy_loss(self, entropy, weights):
        return -torch.mean(self.log_alpha * (self.target_entropy - entropy).detach() * weights)

    def learn(self, batch, weights=1.0):
        q1_loss, q2_loss = self.calc_critic_loss(batch, weights)
        policy_loss, entropies = self.calc_policy_loss(batch, weights)  # ROOT

        update_params(self.q1_optim, self.critic.Q1, q1_loss, self.grad_clip)
        update_params(self.q2_optim, self.critic.Q2, q2_loss, self.grad_clip)
        update_params(self.policy_optim, self.policy, policy_loss, self.grad_clip)

        entropy_loss = self.calc_entropy_loss(entropies, weights)
        update_params(self.alpha_optim, None, entropy_loss)
        self.alpha = self.log_alpha.exp().detach()
        return q1_loss.item(), policy_loss.item()


torch.manual_seed(0)
rng = np.random.default_rng(0)
agent = SacAgent(num_inputs=5, num_actions=2)
for step in range(3):
    batch = (torch.as_tensor(rng.normal(size=(32, 5)), dtype=torch.float32),
             torch.as_tensor(rng.uniform(-1, 1, size=(32, 2)), dtype=torch.float32),
             torch.as_tensor(rng.normal(size=(32, 1)), dtype=torch.float32),
             torch.as_tensor(rng.normal(size=(32, 5)), dtype=torch.float32),
             torch.zeros(32, 1))
    print("q1 loss %.4f, policy loss %.4f" % agent.learn(batch))
