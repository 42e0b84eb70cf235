"""NWM train_step: opt.zero_grad() only runs on the fp32 path, so with bfloat16 the gradients accumulate forever.

source: https://github.com/facebookresearch/nwm/issues/16
kind: bug
symptom: silent
verified: model.net[0].weight.grad keeps growing across steps when bfloat_enable is True
"""
import torch
import torch.nn as nn


class CDiT(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim * 2, 32), nn.GELU(), nn.Linear(32, dim))

    def forward(self, x, cond):
        return self.net(torch.cat([x, cond], dim=-1))


def train_step(model, opt, x, cond, target, bfloat_enable):
    if bfloat_enable:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = (model(x, cond).float() - target).pow(2).mean()
        loss.backward()
    else:
        opt.zero_grad()  # ROOT
        loss = (model(x, cond) - target).pow(2).mean()
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
    opt.step()
    return loss.item()


torch.manual_seed(0)
model = CDiT()
opt = torch.optim.AdamW(model.parameters(), lr=8e-5, weight_decay=0)
for train_steps in range(4):
    x, cond, target = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    train_step(model, opt, x, cond, target, bfloat_enable=True)
