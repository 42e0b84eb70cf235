"""Training only the last layer of an nn.Sequential by handing just model[-1].parameters() to the optimizer, without requires_grad=False on the rest (the thread's "cleaner" method): optimizer.zero_grad() never clears the other layers' .grad, which keep accumulating, and when the whole model is later fine-tuned with a new optimizer (step, then zero_grad) its first step applies the whole accumulated sum.

source: https://discuss.pytorch.org/t/best-practice-for-freezing-layers/58156
kind: bug
symptom: silent
verified: after 10 head-only steps model[0].weight.grad has norm 0.39 (one batch gives 0.08), and the first full fine-tuning step moves model[0].weight by 0.0040, five times a one-batch step
"""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
criterion = nn.CrossEntropyLoss()
batches = [(torch.randn(16, 10), torch.randint(0, 2, (16,))) for _ in range(10)]

optimizer = optim.SGD(model[-1].parameters(), lr=1e0)  # ROOT
for x, y in batches:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
accumulated = model[0].weight.grad.norm().item()

# fine-tune the whole model
optimizer = optim.SGD(model.parameters(), lr=1e-2)
before = model[0].weight.detach().clone()
for x, y in batches[:1]:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(accumulated, (model[0].weight - before).norm().item())
