"""REINFORCE for multi-agent StarCraft: the rollout's action probabilities are reused from the episode buffer.

source: https://github.com/starry-sky6688/MARL-Algorithms/issues/81
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)
n_actions = 3
policy_rnn = nn.GRUCell(4, 8)
policy_head = nn.Linear(8, n_actions)
params = list(policy_rnn.parameters()) + list(policy_head.parameters())
optimizer = torch.optim.RMSprop(params, lr=5e-4)


def choose_action(obs, hidden):
    hidden = policy_rnn(obs, hidden)
    prob = torch.softmax(policy_head(hidden), dim=-1)
    action = np.random.choice(n_actions, p=prob.detach().numpy()[0])
    return action, prob[0, action].item(), hidden


episode = {"o": [], "u": [], "pi": [], "r": []}
hidden = torch.zeros(1, 8)
for t in range(5):
    obs = torch.randn(1, 4)
    action, pi, hidden = choose_action(obs, hidden)
    episode["o"].append(obs)
    episode["u"].append(action)
    episode["pi"].append(pi)  # ROOT
    episode["r"].append(float(action == 1))

returns = torch.tensor(np.cumsum(episode["r"][::-1])[::-1].copy(), dtype=torch.float32)
action_prob = torch.tensor(episode["pi"], dtype=torch.float32)
loss = -(returns * torch.log(action_prob)).sum()
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
