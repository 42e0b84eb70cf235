"""Ultralytics ModelEMA.update lerps the EMA tensors toward the model's state_dict() values without .detach(); state_dict() already returns detached tensors.

source: https://github.com/ultralytics/ultralytics/pull/25315
kind: lookalike
verified: after 5 training steps and EMA updates every EMA tensor has requires_grad False and no grad_fn, and the EMA weight moved toward the model's
"""
import math
from copy import deepcopy

import torch
import torch.nn as nn


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000, updates=0):
        self.ema = deepcopy(model).eval()
        self.updates = updates
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        msd = model.state_dict()
        ema_v, model_v = [], []
        for k, v in self.ema.state_dict().items():
            if v.dtype.is_floating_point:
                ema_v.append(v)
                model_v.append(msd[k])
        torch._foreach_lerp_(ema_v, model_v, 1.0 - d)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
ema = ModelEMA(model)
before = ema.ema[5].weight.clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(5):
    loss = nn.functional.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.randint(0, 2, (4,)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ema.update(model)
print(all(not v.requires_grad and v.grad_fn is None for v in ema.ema.state_dict().values()),
      (ema.ema[5].weight - before).abs().max().item())
