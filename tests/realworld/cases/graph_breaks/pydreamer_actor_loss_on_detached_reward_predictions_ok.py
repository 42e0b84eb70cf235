"""pydreamer ActorCritic: the imagined rewards and values that form the lambda-returns are detached before the REINFORCE actor loss, which is intended: the world model's reward head must not be trained by the actor's objective (the maintainer's answer in the PR).

source: https://github.com/jurgisp/pydreamer/pull/14
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.distributions as D


class ActorCritic(nn.Module):
    def __init__(self, in_dim=16, out_actions=3, gamma=0.99, lambda_gae=0.95, entropy_weight=1e-3):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(in_dim, 32), nn.ELU(), nn.Linear(32, out_actions))
        self.critic = nn.Sequential(nn.Linear(in_dim, 32), nn.ELU(), nn.Linear(32, 1))
        self.gamma, self.lambda_ = gamma, lambda_gae
        self.entropy_weight = entropy_weight

    def training_step(self, features, actions, rewards, terminals):
        reward1 = rewards[1:]
        terminal0, terminal1 = terminals[:-1], terminals[1:]
        value_t = self.critic(features).squeeze(-1)
        value0t, value1t = value_t[:-1], value_t[1:]
        advantage = - value0t + reward1 + self.gamma * (1.0 - terminal1) * value1t
        advantage_gae = []
        agae = None
        for adv, term in zip(reversed(advantage.unbind()), reversed(terminal1.unbind())):
            agae = adv if agae is None else adv + self.lambda_ * self.gamma * (1.0 - term) * agae
            advantage_gae.append(agae)
        advantage_gae.reverse()
        advantage_gae = torch.stack(advantage_gae)
        value_target = advantage_gae + value0t
        reality_weight = (1 - terminal0).log().cumsum(dim=0).exp()

        loss_critic = 0.5 * torch.square(value_target.detach() - value0t)
        loss_critic = (loss_critic * reality_weight).mean()

        policy_distr = D.Categorical(logits=self.actor(features[:-1]))
        action_logprob = policy_distr.log_prob(actions)
        loss_policy = - action_logprob * advantage_gae.detach()
        policy_entropy = policy_distr.entropy()
        loss_actor = ((loss_policy - self.entropy_weight * policy_entropy) * reality_weight).mean()
        return loss_actor, loss_critic


torch.manual_seed(0)
reward_head = nn.Linear(16, 1)
ac = ActorCritic()
optimizer_actor = torch.optim.Adam(ac.actor.parameters(), lr=3e-5)
optimizer_critic = torch.optim.Adam(ac.critic.parameters(), lr=1e-4)
features = torch.randn(6, 4, 16)
rewards = reward_head(features).squeeze(-1).detach()
terminals = torch.zeros(6, 4)
actions = torch.randint(0, 3, (5, 4))
loss_actor, loss_critic = ac.training_step(features, actions, rewards, terminals)
optimizer_actor.zero_grad()
optimizer_critic.zero_grad()
(loss_actor + loss_critic).backward()
optimizer_actor.step()
optimizer_critic.step()
print(loss_actor.item(), loss_critic.item(), reward_head.weight.grad)
