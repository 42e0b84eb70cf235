"""AlpacaFarm PPO step_with_rollouts with the fix (alpaca_farm#58): gradients are cleared through the optimizer, only on sync steps, so each optimizer step sees the gradient accumulated over all its micro-batches.

source: https://github.com/tatsu-lab/alpaca_farm/pull/58
kind: lookalike
"""
import torch
import torch.nn as nn


class PPOTrainer:
    def __init__(self, policy, gradient_accumulation_steps=4, max_grad_norm=None):
        self.policy = policy
        self.optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.max_grad_norm = max_grad_norm
        self.seen_grads = []

    def compute_loss(self, rollouts_batch):
        queries, advantages = rollouts_batch
        logprobs = torch.log_softmax(self.policy(queries), dim=-1)[:, 0]
        return -(logprobs * advantages).mean() / self.gradient_accumulation_steps

    def step_with_rollouts(self, rollouts_dataloader):
        for step_idx, rollouts_batch in enumerate(rollouts_dataloader, 1):
            sync_gradients = step_idx % self.gradient_accumulation_steps == 0
            ppo_loss = self.compute_loss(rollouts_batch)
            ppo_loss.backward()
            if sync_gradients:
                if self.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.seen_grads.append(self.policy.weight.grad.clone())
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)


torch.manual_seed(0)
policy = nn.Linear(8, 5)
trainer = PPOTrainer(policy)
rollouts = [(torch.randn(4, 8), torch.randn(4)) for _ in range(4)]
full, last = [], None
for queries, advantages in rollouts:
    g = torch.autograd.grad(trainer.compute_loss((queries, advantages)), policy.weight)[0]
    full.append(g)
    last = g
mean_grad = torch.stack(full).sum(0)
trainer.step_with_rollouts(rollouts)
print((trainer.seen_grads[0] - last).abs().max().item(), (trainer.seen_grads[0] - mean_grad).abs().max().item())
