"""Reverse distillation: zero_grad() runs every iteration, so accumulation_steps accumulates nothing.

source: https://github.com/tientrandinh/Revisiting-Reverse-Distillation/issues/12
kind: bug
symptom: silent
verified: at each optimizer step, proj.weight.grad equals the last micro-batch's gradient alone
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
proj = nn.Linear(8, 8)
distill = nn.Linear(8, 8)
optimizer_proj = torch.optim.Adam(proj.parameters(), lr=1e-3, betas=(0.5, 0.999))
optimizer_distill = torch.optim.Adam(distill.parameters(), lr=5e-3, betas=(0.5, 0.999))
accumulation_steps = 2
batches = [torch.randn(4, 8) for _ in range(4)]


def compute_loss(img):
    feat = proj(img)
    return ((distill(feat) - img) ** 2).mean()


for i, img in enumerate(batches):
    loss = compute_loss(img)
    optimizer_proj.zero_grad()  # ROOT
    optimizer_distill.zero_grad()
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer_proj.step()
        optimizer_distill.step()
