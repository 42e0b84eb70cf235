"""GFlowNet trajectory balance: get_logprobs clones the policy outputs with a detach, so only logZ trains.

source: https://github.com/alexhernandezgarcia/gflownet/pull/251
kind: bug
symptom: silent
verified: policy model weights get no gradient; only logZ does
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GFlowNetEnv:
    n_actions = 4

    def get_logprobs(self, policy_outputs, actions, mask_invalid_actions=None):
        logits = policy_outputs.clone().detach()  # ROOT
        if mask_invalid_actions is not None:
            logits[mask_invalid_actions] = -float("inf")
        logprobs = torch.log_softmax(logits, dim=1)
        return logprobs.gather(1, actions.unsqueeze(1)).squeeze(1)


env = GFlowNetEnv()
forward_policy = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, env.n_actions))
logZ = nn.Parameter(torch.zeros(1))
opt = torch.optim.Adam([{"params": forward_policy.parameters()}, {"params": [logZ]}], lr=1e-3)

states = torch.randn(5, 3)
actions = torch.randint(0, env.n_actions, (5,))
log_reward = torch.tensor(1.5)
logprobs_f = env.get_logprobs(forward_policy(states), actions)
loss = (logZ + logprobs_f.sum() - log_reward).pow(2).sum()
opt.zero_grad()
loss.backward()
opt.step()
print(forward_policy[0].weight.grad, logZ.grad)
