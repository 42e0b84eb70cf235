"""ECO-pytorch's train() after PR 1: gradients are accumulated over args.iter_size iterations and clipped and stepped only inside the accumulation clause, so the optimizer updates once per accumulation window. The clause is written `if (i + 1) % args.iter_size == 0:` here: ECO's own `i % args.iter_size == 0` (kept by the pull request) is true on the first batch alone, the off-by-one window of loop_order/llms_from_scratch_accumulation_steps_modulo_from_first_batch, a bug of its own, so it cannot stand as the correct look-alike.

source: https://github.com/mzolfaghari/ECO-pytorch/pull/1
kind: lookalike
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

        if (i + 1) % args.iter_size == 0:
            if args.iter_size != 1:
                for g in optimizer.param_groups:
                    for p in g['params']:
                        p.grad /= args.iter_size
            if args.clip_gradient is not None:
                total_norm = clip_grad_norm_(model.parameters(), args.clip_gradient)
            optimizer.step()
            optimizer.zero_grad()

        changed += any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))
    return changed


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
train_loader = [(torch.randn(8, 16), torch.randint(0, 5, (8,))) for _ in range(12)]
print("iterations with a weight update:", train(train_loader, model, nn.CrossEntropyLoss(), optimizer, 0),
      "of", len(train_loader))
