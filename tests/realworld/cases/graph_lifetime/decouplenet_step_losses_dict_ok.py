"""Per-step loss dict kept as tensors: each step rebinds it, so the previous graph is freed.

source: https://github.com/JIA-Lab-research/DecoupleNet/issues/3
kind: lookalike
verified: the model trains and only .item() values are accumulated for the log
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(6, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
meter = {"loss_seg": 0.0, "loss_aux": 0.0}
for step in range(4):
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    out = model(x)
    losses = {"loss_seg": nn.functional.cross_entropy(out, y),
              "loss_aux": out.pow(2).mean() * 0.01}
    loss = sum(losses.values())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for k in meter:
        meter[k] += losses[k].item()
print(meter)
