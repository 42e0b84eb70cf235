"""ECO-pytorch's train() accumulates gradients over args.iter_size iterations and steps inside `if i % args.iter_size == 0:`, but a second gradient clipping and optimizer.step() were left after that clause, so the optimizer also steps on every other iteration with the partial, unscaled accumulated gradient; gradient accumulation is silently turned into a per-batch update.

source: https://github.com/mzolfaghari/ECO-pytorch/pull/1
kind: bug
symptom: silent
verified: with iter_size=4 over 12 iterations the weights change on 12 iterations instead of 3; with the step only inside the iter_size clause (the fix) they change on 3
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_

args = SimpleNamespace(iter_size=4, clip_gradient=20.0)


def train(train_loader, model, criterion, optimizer, epoch):
    changed = 0
    torch.set_grad_enabled(True)
    model.train()
    for i, (input, target) in enumerate(train_loader):
        before = [p.detach().clone() for p in model.parameters()]
        output = model(input)
        loss = criterion(output, target)

        loss.backward()

        if i % args.iter_size == 0:
            if args.iter_size != 1:
                for g in optimizer.param_groups:
                    for p in g['params']:
                        p.grad /= args.iter_size
            if args.clip_gradient is not None:
                total_norm = clip_grad_norm_(model.parameters(), args.clip_gradient)
            optimizer.step()
            optimizer.zero_grad()

        if args.clip_gradient is not None:
            total_norm = clip_grad_norm_(model.parameters(), args.clip_gradient)

        optimizer.step()  # ROOT
        changed += any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))
    return changed


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
train_loader = [(torch.randn(8, 16), torch.randint(0, 5, (8,))) for _ in range(12)]
print("iterations with a weight update:", train(train_loader, model, nn.CrossEntropyLoss(), optimizer, 0),
      "of", len(train_loader))
