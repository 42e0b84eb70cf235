"""Transformer classification train() calls scheduler.step() before optimizer.step(), so every update uses the next step's learning rate.

source: https://github.com/ThilinaRajapakse/pytorch-transformers-classification/issues/21
kind: bug
symptom: silent
verified: the 8 updates use lr [1e-05, 2e-05, 3e-05, 4e-05, 3e-05, 2e-05, 1e-05, 0.0] (the 0.0 warmup start is skipped, the last update is wasted) and torch warns; stepping after the optimizer gives [0.0, 1e-05, ..., 1e-05]
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
args = {'learning_rate': 4e-5, 'warmup_steps': 4, 'max_grad_norm': 1.0, 'gradient_accumulation_steps': 1}
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=args['learning_rate'], eps=1e-8)
t_total = 8
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: step / args['warmup_steps'] if step < args['warmup_steps']
    else max(0.0, (t_total - step) / (t_total - args['warmup_steps'])))
lrs_used = []
tr_loss, global_step = 0.0, 0
for step in range(t_total):
    inputs, labels = torch.randn(8, 16), torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(model(inputs), labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args['max_grad_norm'])
    tr_loss += loss.item()
    if (step + 1) % args['gradient_accumulation_steps'] == 0:
        scheduler.step()  # ROOT
        lrs_used.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        model.zero_grad()
        global_step += 1
print(lrs_used)
