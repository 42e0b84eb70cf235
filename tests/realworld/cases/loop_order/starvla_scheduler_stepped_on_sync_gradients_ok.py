"""Gradient accumulation with the learning-rate scheduler stepped only when the optimizer steps (guarded by the synchronising micro-batch, as in the pull request): warmup and cosine decay follow the optimizer updates they were configured in.

source: https://github.com/starVLA/starVLA/pull/210
kind: lookalike
"""
import math

import torch
import torch.nn as nn


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


torch.manual_seed(0)
gradient_accumulation_steps = 4
max_train_steps = 10  # optimizer updates
model = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
lr_scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=max_train_steps)
batches = [(torch.randn(8, 12), torch.randn(8, 1)) for _ in range(max_train_steps * gradient_accumulation_steps)]
update_lrs = []
for step, (x, y) in enumerate(batches):
    sync_gradients = (step + 1) % gradient_accumulation_steps == 0
    loss = nn.functional.mse_loss(model(x), y) / gradient_accumulation_steps
    loss.backward()
    if sync_gradients:
        update_lrs.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        optimizer.zero_grad()
    if sync_gradients:
        lr_scheduler.step()
print([round(lr * 1e3, 3) for lr in update_lrs])
