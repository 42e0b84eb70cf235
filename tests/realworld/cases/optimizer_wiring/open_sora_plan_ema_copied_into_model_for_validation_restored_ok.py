"""The same Open-Sora-Plan validation with ema_model.restore(model.parameters()) after evaluating the EMA weights: training resumes from the trained weights and the EMA copy is only used for validation.

source: https://github.com/PKU-YuanGroup/Open-Sora-Plan/issues/186
kind: lookalike
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class EMAModel:
    """Cut-down diffusers EMAModel: shadow_params, step, copy_to, store, restore."""

    def __init__(self, parameters, decay=0.99):
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.decay = decay
        self.collected_params = None

    @torch.no_grad()
    def step(self, parameters):
        for s_param, param in zip(self.shadow_params, parameters):
            s_param.sub_((1 - self.decay) * (s_param - param))

    def copy_to(self, parameters):
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.data)

    def store(self, parameters):
        self.collected_params = [param.clone() for param in parameters]

    def restore(self, parameters):
        for c_param, param in zip(self.collected_params, parameters):
            param.data.copy_(c_param.data)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 1))
ema_model = EMAModel(model.parameters(), decay=0.99)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 8), torch.randn(64, 1)
x_val, y_val = torch.randn(16, 8), torch.randn(16, 1)
jump = None
for step in range(1, 61):
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ema_model.step(model.parameters())
    if step % 10 == 0:
        before = copy.deepcopy(model[0].weight.detach())
        ema_model.store(model.parameters())
        ema_model.copy_to(model.parameters())
        with torch.no_grad():
            val_loss = F.mse_loss(model(x_val), y_val)
        ema_model.restore(model.parameters())
        if jump is None:
            jump = (model[0].weight.detach() - before).abs().max().item()
print(step, round(loss.item(), 4), round(jump, 4), round(val_loss.item(), 4))
