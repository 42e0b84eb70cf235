"""Schedule-free README recipe: before validation the model runs a few training batches in train mode under no_grad to refresh BatchNorm statistics, then switches to eval.

source: https://github.com/facebookresearch/schedule_free/issues/60
kind: lookalike
verified: the warmup pass moves running_mean (max abs 0.36) but leaves every weight unchanged and no .grad is written; validation then runs in eval mode
"""
import itertools

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
train_loader = [(torch.randn(8, 6) + 1.0, torch.randint(0, 2, (8,))) for _ in range(60)]
val_loader = [(torch.randn(8, 6) + 1.0, torch.randint(0, 2, (8,))) for _ in range(3)]

model.train()
for x, y in train_loader[:10]:
    optimizer.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
optimizer.zero_grad(set_to_none=True)

weights_before = [p.detach().clone() for p in model.parameters()]
mean_before = model[1].running_mean.clone()
model.train()
with torch.no_grad():
    for x, _ in itertools.islice(train_loader, 50):
        model(x)
model.eval()
with torch.no_grad():
    val_loss = sum(nn.functional.cross_entropy(model(x), y).item() for x, y in val_loader)
print((model[1].running_mean - mean_before).abs().max().item(),
      all(torch.equal(a, b) for a, b in zip(weights_before, model.parameters())),
      all(p.grad is None for p in model.parameters()), round(val_loss, 3))
