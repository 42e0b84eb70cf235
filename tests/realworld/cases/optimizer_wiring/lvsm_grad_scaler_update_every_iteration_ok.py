"""LVSM skips the optimizer step when the unscaled grad norm is too large, but calls scaler.update() on every iteration.

source: https://github.com/Haian-Jin/LVSM/pull/19
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cpu")
grad_clip_norm, skip_threshold = 2.0, 5.0

for step in range(4):
    x = torch.randn(8, 16) * (20.0 if step == 1 else 1.0)
    loss = nn.functional.mse_loss(model(x), torch.randn(8, 16))
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip_norm)
    if total_grad_norm > skip_threshold:
        print(f"WARNING: step {step} grad norm too large {total_grad_norm:.2f} > {skip_threshold}, skipping optimizer step")
    else:
        scaler.step(optimizer)
    scaler.update()
