"""SLM-Lab's Reinforce.calc_policy_loss turns the episode's log-probabilities into a tensor with torch.tensor(self.body.log_probs, requires_grad=True): torch.tensor copies the values into a brand-new leaf, so the policy-gradient loss backpropagates into that copy only and the policy network never receives a gradient (REINFORCE, and the actor-critic family built on it, did not learn).

source: https://github.com/kengz/SLM-Lab/pull/133
kind: bug
symptom: silent
verified: after 30 episodes the policy net's weights moved 0.0 and their .grad stays None (the loss backpropagates into the copied leaf only; torch warns about converting a tensor that requires grad to a scalar); with torch.stack(self.body.log_probs) (the fix) the net moves 1.5214
"""
from types import SimpleNamespace

import torch
import torch.nn as nn


def calc_returns(batch, gamma):
    rewards, dones = batch["rewards"], batch["dones"]
    rets = torch.zeros_like(rewards)
    future_ret = torch.tensor(0.0)
    for t in reversed(range(len(rewards))):
        future_ret = rewards[t] + gamma * future_ret * (1 - dones[t])
        rets[t] = future_ret
    return rets


class Reinforce:
    def __init__(self, body, net, gamma=0.99, add_entropy=True, entropy_coef=0.01):
        self.body, self.net = body, net
        self.gamma, self.add_entropy, self.entropy_coef = gamma, add_entropy, entropy_coef
        self.optim = torch.optim.Adam(net.parameters(), lr=1e-2)

    def act(self, state):
        action_pd = torch.distributions.Categorical(logits=self.net(state))
        action = action_pd.sample()
        self.body.entropies.append(action_pd.entropy())
        self.body.log_probs.append(action_pd.log_prob(action.float()))
        return action

    def calc_policy_loss(self, batch):
        advs = calc_returns(batch, self.gamma)
        adv_std = advs.std()
        adv_std[adv_std != adv_std] = 0
        adv_std += 1e-08
        advs = (advs - advs.mean()) / adv_std
        assert len(self.body.log_probs) == len(advs)
        log_probs = torch.tensor(self.body.log_probs, requires_grad=True)  # ROOT
        entropies = torch.tensor(self.body.entropies, requires_grad=True)
        policy_loss = - log_probs * advs
        if self.add_entropy:
            policy_loss += (- self.entropy_coef * entropies)
        return torch.sum(policy_loss)

    def update(self, batch):
        loss = self.calc_policy_loss(batch)
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()
        self.body.log_probs, self.body.entropies = [], []
        return loss.item()


torch.manual_seed(0)
body = SimpleNamespace(log_probs=[], entropies=[])
net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
agent = Reinforce(body, net)
start = [p.detach().clone() for p in net.parameters()]
for episode in range(30):
    states = torch.randn(20, 4)
    actions = torch.stack([agent.act(s) for s in states])
    batch = {"rewards": (actions == (states[:, 0] > 0).long()).float(), "dones": torch.zeros(20)}
    agent.update(batch)
moved = sum((p - q).norm() for p, q in zip(net.parameters(), start)).item()
print("policy moved", moved, "grad is None", net[0].weight.grad is None)
