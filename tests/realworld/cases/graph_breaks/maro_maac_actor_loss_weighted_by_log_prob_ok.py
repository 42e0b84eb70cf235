"""MARO after "Fix bug: correct missing gradient in `actor_loss` by `lopg`": the actor loss keeps the log-probability of the re-sampled action and weights the critic's value by it, `-(q_values * logp).mean()`, so the summed loss reaches every actor network through `logp` and the actors train with the critic.

source: https://github.com/microsoft/maro/commit/af37a61f83d535aa1d117d48e7a6965428c64654
kind: lookalike
"""
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
np.random.seed(0)
STATE_DIM, N_ACTIONS, N_AGENTS = 6, 3, 2


class DiscretePolicyGradientNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(STATE_DIM, 16), nn.Tanh(), nn.Linear(16, N_ACTIONS))
        self.optim = torch.optim.Adam(self.actor.parameters(), lr=1e-2)

    def get_probs(self, states):
        return torch.softmax(self.actor(states), dim=-1)

    def get_actions_and_logps(self, states, exploring=True):
        probs = self.get_probs(states)
        if exploring:
            distribution = torch.distributions.Categorical(probs)
            actions = distribution.sample()
            logps = distribution.log_prob(actions)
        else:
            probs_max, actions = probs.max(dim=1)
            logps = torch.log(probs_max)
        return actions, logps



class CentralizedCriticNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(STATE_DIM + N_AGENTS, 32), nn.ReLU(), nn.Linear(32, 1))
        self.optim = torch.optim.Adam(self.mlp.parameters(), lr=1e-2)

    def q_critic(self, states, actions):
        return self.mlp(torch.cat([states, actions.float()], dim=1)).squeeze(-1)



class MultiDiscreteActorCritic:
    def __init__(self, reward_discount=0.9, critic_loss_coef=0.1, exploring=True):
        self._agent_nets = [DiscretePolicyGradientNetwork() for _ in range(N_AGENTS)]
        self._critic_net = CentralizedCriticNet()
        self._reward_discount = reward_discount
        self._critic_loss_coef = critic_loss_coef
        self._critic_loss_func = nn.MSELoss()
        self._exploring = exploring

    def _get_values_by_states_and_actions(self, states, actions):
        return self._critic_net.q_critic(states, torch.stack(actions).T)

    def get_batch_loss(self, batch):
        states = torch.from_numpy(batch["states"])
        actions = [torch.from_numpy(a).long() for a in batch["actions"]]
        rewards = torch.from_numpy(batch["rewards"])
        target_q_values = rewards.detach()
        q_values = self._get_values_by_states_and_actions(states, actions)
        critic_loss = self._critic_loss_func(q_values, target_q_values)

        # actor losses
        actor_losses = []
        for i in range(N_AGENTS):
            net = self._agent_nets[i]
            new_action, logp = net.get_actions_and_logps(states, self._exploring)  # [batch_size], [batch_size]
            cur_actions = [action for action in actions]
            cur_actions[i] = new_action
            q_values = self._get_values_by_states_and_actions(states, cur_actions)
            actor_loss = -(q_values * logp).mean()
            actor_losses.append(actor_loss)

        # total loss
        return sum(actor_losses) + self._critic_loss_coef * critic_loss

    def learn(self, batch):
        loss = self.get_batch_loss(batch)
        nets = self._agent_nets + [self._critic_net]
        for net in nets:
            net.optim.zero_grad()
        loss.backward()
        for net in nets:
            net.optim.step()


def sample_batch(size=32):
    states = np.random.randn(size, STATE_DIM).astype(np.float32)
    actions = [np.random.randint(0, N_ACTIONS, size) for _ in range(N_AGENTS)]
    rewards = (states[:, 0] * (actions[0] == 1) - states[:, 1] * (actions[1] == 2)).astype(np.float32)
    return {"states": states, "actions": actions, "rewards": rewards}


policy = MultiDiscreteActorCritic()
actors_before = [[p.detach().clone() for p in net.parameters()] for net in policy._agent_nets]
critic_before = [p.detach().clone() for p in policy._critic_net.parameters()]
for update in range(20):
    policy.learn(sample_batch())

changed = lambda before, module: any(not torch.equal(b, p) for b, p in zip(before, module.parameters()))
print("actors changed:", [changed(b, net) for b, net in zip(actors_before, policy._agent_nets)],
      "actor grads:", [net.actor[0].weight.grad is not None for net in policy._agent_nets],
      "critic changed:", changed(critic_before, policy._critic_net))
