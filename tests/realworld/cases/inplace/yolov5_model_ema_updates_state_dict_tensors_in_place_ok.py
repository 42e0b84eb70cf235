"""YOLOv5 ModelEMA: `v *= d; v += (1 - d) * msd[k].detach()` on the tensors of ema.state_dict() under no_grad; state_dict tensors share storage with the EMA model, so the EMA weights really move.

source: https://github.com/ultralytics/yolov5/issues/5240
kind: lookalike
verified: the EMA weights change after each update and move toward the trained model's weights
"""
import math
from copy import deepcopy

import torch
import torch.nn as nn


def de_parallel(model):
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000, updates=0):
        self.ema = deepcopy(de_parallel(model)).eval()
        self.updates = updates
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            self.updates += 1
            d = self.decay(self.updates)

            msd = de_parallel(model).state_dict()
            for k, v in self.ema.state_dict().items():
                if v.dtype.is_floating_point:
                    v *= d
                    v += (1 - d) * msd[k].detach()


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 4))
ema = ModelEMA(model, tau=2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.937, nesterov=True)
before = ema.ema[0].weight.clone()
for i in range(3):
    imgs, targets = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    loss = nn.functional.cross_entropy(model(imgs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    ema.update(model)
print((ema.ema[0].weight - before).abs().max().item() > 0)
