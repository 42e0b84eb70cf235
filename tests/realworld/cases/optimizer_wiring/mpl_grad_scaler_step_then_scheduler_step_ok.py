"""Meta Pseudo Labels student update: scaler.step(optimizer), scaler.update(), then scheduler.step(), with unscale_ before clipping.

source: https://github.com/kekmodel/MPL-pytorch/issues/38
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
student_model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
s_optimizer = torch.optim.SGD(student_model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
s_scheduler = torch.optim.lr_scheduler.LambdaLR(s_optimizer, lambda step: min(1.0, (step + 1) / 5))
s_scaler = torch.amp.GradScaler("cpu")
grad_clip = 1.0
for step in range(6):
    images, targets = torch.randn(8, 16), torch.randint(0, 10, (8,))
    s_loss = nn.functional.cross_entropy(student_model(images), targets)
    s_optimizer.zero_grad()
    s_scaler.scale(s_loss).backward()
    if grad_clip > 0:
        s_scaler.unscale_(s_optimizer)
        nn.utils.clip_grad_norm_(student_model.parameters(), grad_clip)
    s_scaler.step(s_optimizer)
    s_scaler.update()
    s_scheduler.step()
