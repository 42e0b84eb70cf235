"""DualTalk scales the loss by the accumulation steps and clears the gradients only after each accumulated step.

source: https://github.com/ZiqiaoPeng/DualTalk/issues/9
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 15))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
criterion = nn.MSELoss()
gradient_accumulation_steps = 4
train_loader = [(torch.randn(2, 32), torch.randn(2, 15)) for _ in range(8)]
loss_log = []

optimizer.zero_grad()
for i, (audio, vertice) in enumerate(train_loader, start=1):
    loss = criterion(model(audio), vertice) / gradient_accumulation_steps
    loss.backward()
    loss_log.append(loss.item())
    if i % gradient_accumulation_steps == 0 or i == len(train_loader):
        optimizer.step()
        optimizer.zero_grad()
