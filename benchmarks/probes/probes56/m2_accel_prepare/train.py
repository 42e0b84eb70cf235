import torch
import torch.nn as nn
from accel import Accelerator

accelerator = Accelerator(grad_accum=2)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
loader = [(torch.randn(6, 4), torch.randn(6, 1)) for _ in range(6)]
model, loader = accelerator.prepare(model, loader)  # ROOT
w0 = model[0].weight.detach().clone()
for i, (x, y) in enumerate(loader):
    loss = nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    if (i + 1) % accelerator.grad_accum == 0:
        optimizer.step()
        optimizer.zero_grad()
print("moved", (model[0].weight - w0).abs().max().item())
