import copy
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
X, Y = torch.randn(64, 3), torch.randn(64, 1)
Xv, Yv = torch.randn(32, 3), torch.randn(32, 1)
best, best_state, bad = float("inf"), copy.deepcopy(model), 0

for epoch in range(12):
    loss = nn.functional.mse_loss(model(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        val = nn.functional.mse_loss(model(Xv), Yv).item()
    if val < best:
        best, best_state, bad = val, copy.deepcopy(model), 0
    else:
        bad += 1
        if bad == 2:
            model = copy.deepcopy(best_state)  # ROOT
            bad = 0
w = model[0].weight.clone()
loss = nn.functional.mse_loss(model(X), Y)
opt.zero_grad(); loss.backward(); opt.step()
print("after restore moved:", (model[0].weight - w).abs().max().item())
