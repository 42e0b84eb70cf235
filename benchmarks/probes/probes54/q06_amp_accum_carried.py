import torch
import torch.nn as nn
import torch.nn.functional as F

ACCUM = 2
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
batches = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(6)]

pending = 0.0
for step, (x, y) in enumerate(batches):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    pending = pending + loss / ACCUM  # ROOT
    if (step + 1) % ACCUM == 0:
        scaler.scale(pending).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
