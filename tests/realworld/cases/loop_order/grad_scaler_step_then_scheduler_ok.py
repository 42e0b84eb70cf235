"""RAFT training: scaler.step(optimizer) runs the optimizer step, then scheduler.step(), then scaler.update().

source: https://github.com/princeton-vl/RAFT/issues/104
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 3, padding=1))
optimizer = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=1e-5, eps=1e-8)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 4e-4, 10, pct_start=0.05, cycle_momentum=False)
scaler = torch.amp.GradScaler('cpu', enabled=True)
image_pair, flow = torch.randn(2, 6, 8, 8), torch.randn(2, 2, 8, 8)
for total_steps in range(5):
    optimizer.zero_grad()
    flow_predictions = model(image_pair)
    loss = (flow_predictions - flow).abs().mean()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scheduler.step()
    scaler.update()
