"""trpo-pytorch: surrogate_loss(log_action_probs, log_action_probs.detach(), advantages) evaluates to the mean advantage, but its gradient is the policy gradient, because only the first argument carries the graph (the answer in the thread).

source: https://github.com/ajlangley/trpo-pytorch/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.distributions import Categorical
from torch.autograd import grad


class TRPO:
    def __init__(self, policy, max_kl_div=0.01):
        self.policy = policy
        self.max_kl_div = max_kl_div

    def surrogate_loss(self, log_action_probs, imp_sample_probs, advantages):
        return torch.mean(torch.exp(log_action_probs - imp_sample_probs) * advantages)

    def update_policy(self, states, actions, advantages):
        action_dists = Categorical(logits=self.policy(states))
        log_action_probs = action_dists.log_prob(actions)
        loss = self.surrogate_loss(log_action_probs, log_action_probs.detach(), advantages)
        loss_grad = grad(loss, self.policy.parameters(), retain_graph=True)
        loss_grad = torch.cat([g.view(-1) for g in loss_grad])
        step_dir = loss_grad / (loss_grad.norm() + 1e-8)
        step_len = torch.sqrt(2 * torch.tensor(self.max_kl_div))
        with torch.no_grad():
            offset = 0
            for p in self.policy.parameters():
                n = p.numel()
                p.add_(step_len * step_dir[offset:offset + n].view_as(p))
                offset += n
        return loss.item(), loss_grad.norm().item()


torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
trpo = TRPO(policy)
states, actions, advantages = torch.randn(16, 4), torch.randint(0, 2, (16,)), torch.randn(16)
print(trpo.update_policy(states, actions, advantages), advantages.mean().item())
