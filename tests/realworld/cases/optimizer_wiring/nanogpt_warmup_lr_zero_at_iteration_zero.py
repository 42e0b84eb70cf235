"""nanoGPT-style linear warmup returns a learning rate of exactly 0 at iteration 0.

source: https://github.com/karpathy/nanoGPT/pull/578
kind: bug
symptom: silent
verified: get_lr(0) == 0.0; the weights after the first optimizer.step() equal the initial weights
"""
import math
import torch
import torch.nn as nn

torch.manual_seed(0)
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 10
lr_decay_iters = 100


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters  # ROOT
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


model = nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 32))
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95))
for iter_num in range(20):
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
    X = torch.randint(0, 32, (4, 8))
    Y = torch.randint(0, 32, (4, 8))
    logits = model(X)
    loss = nn.functional.cross_entropy(logits.view(-1, 32), Y.view(-1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
