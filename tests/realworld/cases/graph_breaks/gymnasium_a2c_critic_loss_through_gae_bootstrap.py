"""Gymnasium's A2C tutorial regresses the critic on the GAE advantages themselves (critic_loss = advantages.pow(2).mean()), and the advantages are built from value_preds with gradients on, so the critic's gradient also flows through the bootstrapped value_preds[t + 1] of every later step: the critic is pushed toward its own moving target instead of a fixed one.

source: https://github.com/Farama-Foundation/Gymnasium/issues/1494
kind: bug
symptom: silent
verified: same seeded rollout: on the first update the critic head's weight gradient is 1.64 in norm against 2.71 with the fixed (detached) target, 1.41 apart (cosine 0.90), i.e. a different regression problem; after 30 updates on the same states and rewards the critic's squared error against the discounted returns is 5.49 against 5.93 with the fixed target (a short run on random rewards favours neither)
"""
import torch
import torch.nn as nn


class A2C(nn.Module):
    def __init__(self, n_features, n_actions, n_envs):
        super().__init__()
        self.n_envs = n_envs
        self.critic = nn.Sequential(nn.Linear(n_features, 16), nn.ReLU(), nn.Linear(16, 1))
        self.actor = nn.Sequential(nn.Linear(n_features, 16), nn.ReLU(), nn.Linear(16, n_actions))
        self.critic_optim = torch.optim.RMSprop(self.critic.parameters(), lr=5e-3)
        self.actor_optim = torch.optim.RMSprop(self.actor.parameters(), lr=1e-3)

    def forward(self, x):
        return self.critic(x), self.actor(x)

    def get_losses(self, rewards, action_log_probs, value_preds, entropy, masks, gamma, lam, ent_coef):
        T = len(rewards)
        advantages = torch.zeros(T, self.n_envs)
        gae = 0.0
        for t in reversed(range(T - 1)):
            td_error = rewards[t] + gamma * masks[t] * value_preds[t + 1] - value_preds[t]
            gae = td_error + gamma * lam * masks[t] * gae
            advantages[t] = gae
        critic_loss = advantages.pow(2).mean()  # ROOT
        actor_loss = -(advantages.detach() * action_log_probs).mean() - ent_coef * entropy.mean()
        return critic_loss, actor_loss

    def update_parameters(self, critic_loss, actor_loss):
        self.critic_optim.zero_grad()
        critic_loss.backward()
        self.critic_optim.step()
        self.actor_optim.zero_grad()
        actor_loss.backward()
        self.actor_optim.step()


torch.manual_seed(0)
n_envs, n_steps, n_features, n_actions = 4, 16, 6, 2
agent = A2C(n_features, n_actions, n_envs)
states = torch.randn(n_steps, n_envs, n_features)
rewards = torch.randn(n_steps, n_envs)
masks = torch.ones(n_steps, n_envs)
for update in range(30):
    values, logits = agent(states)
    value_preds = values.squeeze(-1)
    dist = torch.distributions.Categorical(logits=logits)
    actions = dist.sample()
    critic_loss, actor_loss = agent.get_losses(rewards, dist.log_prob(actions), value_preds, dist.entropy(),
                                               masks, gamma=0.9, lam=0.95, ent_coef=0.01)
    agent.update_parameters(critic_loss, actor_loss)
returns = torch.zeros(n_steps, n_envs)
running = torch.zeros(n_envs)
for t in reversed(range(n_steps)):
    running = rewards[t] + 0.9 * running
    returns[t] = running
with torch.no_grad():
    print("value error", float((agent.critic(states).squeeze(-1) - returns)[:-1].pow(2).mean()))
