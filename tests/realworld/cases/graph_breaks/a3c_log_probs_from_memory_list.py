"""A3C worker: log-probs kept in the episode memory are rebuilt with torch.tensor([...]).

source: https://github.com/Quantum-Cheese/DeepReinforcementLearning_Pytorch/issues/1
kind: bug
symptom: silent
verified: the actor's weights get no gradient; only the critic trains
"""
import torch
import torch.nn as nn
from torch.distributions import Categorical

torch.manual_seed(0)


class ActorCritic(nn.Module):
    def __init__(self, state_size=4, action_size=2):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(state_size, 16), nn.ReLU(),
                                   nn.Linear(16, action_size), nn.Softmax(dim=-1))
        self.critic = nn.Sequential(nn.Linear(state_size, 16), nn.ReLU(), nn.Linear(16, 1))


class Worker:
    def __init__(self, model, gamma=0.99):
        self.model, self.gamma, self.memory = model, gamma, []
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def act(self, state):
        dist = Categorical(self.model.actor(state))
        action = dist.sample()
        return action.item(), dist.log_prob(action)

    def learn(self):
        states = torch.stack([t[0] for t in self.memory])
        log_probs = torch.tensor([t[1] for t in self.memory], dtype=torch.float)  # ROOT
        rewards = [t[2] for t in self.memory]
        returns, R = [], 0.0
        for r in reversed(rewards):
            R = r + self.gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        values = self.model.critic(states).squeeze(1)
        advantages = returns - values
        actor_loss = -(log_probs * advantages.detach()).mean()
        critic_loss = advantages.pow(2).mean()
        self.optimizer.zero_grad()
        (actor_loss + critic_loss).backward()
        self.optimizer.step()


worker = Worker(ActorCritic())
for t in range(6):
    state = torch.randn(4)
    action, log_prob = worker.act(state)
    worker.memory.append((state, log_prob, float(action == t % 2)))
worker.learn()
print(worker.model.actor[0].weight.grad)
