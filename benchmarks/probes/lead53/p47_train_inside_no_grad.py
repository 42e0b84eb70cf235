import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
train = [(torch.randn(5, 4), torch.randn(5, 1)) for _ in range(3)]
val = [(torch.randn(5, 4), torch.randn(5, 1)) for _ in range(2)]

for epoch in range(2):
    model.eval()
    with torch.no_grad():  # ROOT
        val_loss = sum(nn.functional.mse_loss(model(x), y).item() for x, y in val)
        model.train()
        for x, y in train:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
    print(epoch, val_loss)
