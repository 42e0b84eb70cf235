"""Open-Sora-Plan validates with the EMA weights by calling ema_model.store(model.parameters()) and ema_model.copy_to(model.parameters()) but never ema_model.restore(...): after the first validation the optimizer keeps stepping the EMA copy instead of the trained weights, and every validation pulls the model back towards the slow average.

source: https://github.com/PKU-YuanGroup/Open-Sora-Plan/issues/186
kind: bug
symptom: silent
verified: with validation every 10 of 60 AdamW steps (lr 1e-2, EMA decay 0.99) the first validation leaves the trained first-layer weights moved by 0.096 (max abs) and the final training loss is 0.438, against 0.0 and 0.0555 when ema_model.restore(model.parameters()) follows the validation (the fix asked for in the issue)
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
        ema_model.copy_to(model.parameters())  # ROOT
        with torch.no_grad():
            val_loss = F.mse_loss(model(x_val), y_val)
        if jump is None:
            jump = (model[0].weight.detach() - before).abs().max().item()
print(step, round(loss.item(), 4), round(jump, 4), round(val_loss.item(), 4))
