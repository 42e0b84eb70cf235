"""A soft-dice loss configured with functools.partial."""
from functools import partial
import torch
import torch.nn as nn


def dice_loss(logits, target, smooth=1.0, from_logits=True):
    probs = torch.sigmoid(logits) if from_logits else logits
    probs = torch.round(probs)  # ROOT
    inter = (probs * target).sum((1, 2, 3))
    union = probs.sum((1, 2, 3)) + target.sum((1, 2, 3))
    return (1 - (2 * inter + smooth) / (union + smooth)).mean()


criterion = partial(dice_loss, smooth=0.5)
net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.5)
before = net[0].weight.detach().clone()
for _ in range(5):
    img, mask = torch.randn(2, 1, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()
    loss = criterion(net(img), mask)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("moved", (net[0].weight - before).abs().max().item())
