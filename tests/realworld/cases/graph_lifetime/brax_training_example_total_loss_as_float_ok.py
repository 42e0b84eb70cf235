"""PyTorch training example adds float(loss) to total_loss, so no step's graph outlives the step.

source: https://github.com/google/brax/pull/152
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
input, target = torch.randn(32, 8), torch.randn(32, 1)
total_loss = 0
for i in range(100):
    optimizer.zero_grad()
    output = model(input)
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
    total_loss += float(loss)
print(total_loss / 100)
