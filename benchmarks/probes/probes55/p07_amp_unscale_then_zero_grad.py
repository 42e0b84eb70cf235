import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu")
w0 = model[0].weight.clone()

for step in range(4):
    x, y = torch.randn(16, 12), torch.randn(16, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    optimizer.zero_grad(set_to_none=True)  # ROOT
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
print("moved:", (model[0].weight - w0).abs().max().item())
