"""nanoGPT-style loop divides each micro-step loss by gradient_accumulation_steps before backward.

source: https://github.com/karpathy/nanoGPT/issues/206
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
vocab_size, block_size, batch_size = 50, 8, 4
gradient_accumulation_steps, grad_clip = 5, 1.0
model = nn.Sequential(nn.Embedding(vocab_size, 32), nn.Linear(32, vocab_size))
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
scaler = torch.amp.GradScaler("cpu", enabled=False)
data = torch.randint(0, vocab_size, (1000,))


def get_batch(split):
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x, y


X, Y = get_batch('train')
for iter_num in range(3):
    for micro_step in range(gradient_accumulation_steps):
        logits = model(X)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), Y.view(-1))
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch('train')
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    print(iter_num, total_norm.item())
