"""DualTalk clears the gradients before every backward, so gradient accumulation keeps only the last micro-batch.

source: https://github.com/ZiqiaoPeng/DualTalk/issues/9
kind: bug
symptom: silent
verified: the gradient used at each optimizer.step() is the 4th micro-batch's alone; the accumulated gradient of the 4 micro-batches differs from it by 0.19 (max abs, first layer)
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

for i, (audio, vertice) in enumerate(train_loader, start=1):
    loss = criterion(model(audio), vertice)
    optimizer.zero_grad()  # ROOT
    loss.backward()
    loss_log.append(loss.item())
    if i % gradient_accumulation_steps == 0:
        grad_at_step = model[0].weight.grad.clone()
        optimizer.step()
        optimizer.zero_grad()
