"""SAC-discrete policy loss: the critic's Q-values are computed under no_grad, the policy's are not.

source: https://github.com/toshikwa/sac-discrete.pytorch/issues/24
kind: lookalike
verified: the policy's weights get a gradient, the critic's do not
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
online_critic = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
policy_optim = torch.optim.Adam(policy.parameters(), lr=3e-4)
alpha = 0.2


def calc_policy_loss(states):
    logits = policy(states)
    action_probs = torch.softmax(logits, dim=1)
    log_action_probs = torch.log_softmax(logits, dim=1)
    with torch.no_grad():
        q = online_critic(states)
    entropies = -torch.sum(action_probs * log_action_probs, dim=1, keepdim=True)
    q = torch.sum(q * action_probs, dim=1, keepdim=True)
    return (-q - alpha * entropies).mean()


policy_loss = calc_policy_loss(torch.randn(8, 4))
policy_optim.zero_grad()
policy_loss.backward()
policy_optim.step()
print(policy[0].weight.grad is not None, online_critic[0].weight.grad is None)
