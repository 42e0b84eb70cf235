"""Faster R-CNN epoch loop: the running total is summed with float(loss) after the step.

source: https://github.com/bubbliiiing/faster-rcnn-pytorch/issues/27
kind: lookalike
verified: the weights change every step and total_loss is a Python float
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total_loss = 0
for iteration in range(3):
    imgs, labels = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(imgs), labels)
    loss.backward()
    optimizer.step()
    total_loss += float(loss)
print(total_loss / 3)
