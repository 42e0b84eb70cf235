"""ReAgent's REINFORCE trainer is a generator driven one optimizer at a time (the Lightning module calls `next()` on it for each optimizer index, and each yielded loss is backpropagated and stepped before the next `next()`): it yields the value-net loss first, then subtracts the same `baselines` from the returns to build the policy loss. The policy loss's graph still runs through the value net, whose graph was freed by the value loss's backward, so the policy step fails.

source: https://github.com/facebookresearch/ReAgent/commit/03b5e288f615de75952798a1faa5e6fd1fd7410d
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def discounted_returns(rewards, gamma=0.0):
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


class ReinforceTrainer:
    def __init__(self, scorer, value_net=None, gamma=0.9, reward_clip=1e6, lr=1e-2):
        self.scorer = scorer
        self.value_net = value_net
        self.gamma = gamma
        self.reward_clip = reward_clip
        self.value_loss_fn = nn.MSELoss(reduction="mean")
        self.lr = lr

    def configure_optimizers(self):
        optimizers = []
        if self.value_net is not None:
            optimizers.append(torch.optim.Adam(self.value_net.parameters(), lr=self.lr))
        optimizers.append(torch.optim.Adam(self.scorer.parameters(), lr=self.lr))
        return optimizers

    def train_step_gen(self, state, actions, rewards):
        scores = self.scorer(state)
        characteristic_eligibility = torch.distributions.Categorical(logits=scores).log_prob(actions).float()
        offset_reinforcement = discounted_returns(torch.clamp(rewards, max=self.reward_clip).clone(), self.gamma)
        if self.value_net is not None:
            baselines = self.value_net(state).squeeze()
            yield self.value_loss_fn(baselines, offset_reinforcement)
            # subtract learned value function baselines from rewards
            offset_reinforcement = offset_reinforcement - baselines

        loss = -(offset_reinforcement.float()) @ characteristic_eligibility  # ROOT
        yield loss


def fit(trainer, batches):
    """The Lightning loop with one optimizer per training step, as ReAgentLightningModule drives it."""
    optimizers = trainer.configure_optimizers()
    for state, actions, rewards in batches:
        gen = trainer.train_step_gen(state, actions, rewards)
        for optimizer in optimizers:
            loss = next(gen)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"policy loss {loss.item():.4f}")


scorer = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3))
value_net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
trainer = ReinforceTrainer(scorer, value_net=value_net)
batches = [(torch.randn(10, 6), torch.randint(0, 3, (10,)), torch.rand(10)) for _ in range(4)]
fit(trainer, batches)
