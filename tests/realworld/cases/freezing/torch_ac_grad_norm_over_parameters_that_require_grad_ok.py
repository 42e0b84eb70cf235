"""torch-ac PPO update with the PR's change: grad_norm and clip_grad_norm_ are taken only over the acmodel parameters that require grad, so the frozen rnn (whose .grad stays None) is skipped.

source: https://github.com/lcswillems/torch-ac/pull/5
kind: lookalike
verified: prints the gradient norm of the trainable actor and critic parameters
"""
import torch
import torch.nn as nn


class ACModel(nn.Module):
    def __init__(self, obs_size=8, n_actions=3, hidden=16):
        super().__init__()
        self.rnn = nn.LSTMCell(obs_size, hidden)
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs, memory):
        h, c = self.rnn(obs, memory)
        dist = torch.distributions.Categorical(logits=self.actor(h))
        return dist, self.critic(h).squeeze(1), (h, c)


class TransferACModel(ACModel):
    def __init__(self):
        super().__init__()
        for param in self.rnn.parameters():
            param.requires_grad = False


class PPOAlgo:
    def __init__(self, acmodel, lr=7e-4, adam_eps=1e-8, max_grad_norm=0.5, clip_eps=0.2):
        self.acmodel = acmodel
        self.max_grad_norm = max_grad_norm
        self.clip_eps = clip_eps
        self.optimizer = torch.optim.Adam(self.acmodel.parameters(), lr, eps=adam_eps)

    def update_parameters(self, obs, memory, action, advantage, returnn, log_prob):
        dist, value, _ = self.acmodel(obs, memory)
        ratio = torch.exp(dist.log_prob(action) - log_prob)
        surr1 = ratio * advantage
        surr2 = torch.clamp(ratio, 1.0 - self.clip_eps, 1.0 + self.clip_eps) * advantage
        policy_loss = -torch.min(surr1, surr2).mean()
        value_loss = (value - returnn).pow(2).mean()
        batch_loss = policy_loss - 0.01 * dist.entropy().mean() + 0.5 * value_loss
        self.optimizer.zero_grad()
        batch_loss.backward()
        grad_norm = sum(p.grad.data.norm(2).item() ** 2 for p in self.acmodel.parameters() if p.requires_grad) ** 0.5
        torch.nn.utils.clip_grad_norm_([p for p in self.acmodel.parameters() if p.requires_grad], self.max_grad_norm)
        self.optimizer.step()
        return grad_norm


torch.manual_seed(0)
acmodel = TransferACModel()
algo = PPOAlgo(acmodel)
obs = torch.randn(16, 8)
memory = (torch.zeros(16, 16), torch.zeros(16, 16))
with torch.no_grad():
    dist, value, _ = acmodel(obs, memory)
    action = dist.sample()
    log_prob = dist.log_prob(action)
advantage, returnn = torch.randn(16), torch.randn(16)
print(algo.update_parameters(obs, memory, action, advantage, returnn, log_prob))
