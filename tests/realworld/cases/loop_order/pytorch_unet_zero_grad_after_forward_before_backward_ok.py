"""Pytorch-UNet train loop: optimizer.zero_grad(set_to_none=True) is called after the forward pass and loss, right before backward; the gradients are cleared before they are accumulated, so the order is fine.

source: https://github.com/milesial/Pytorch-UNet/issues/378
kind: lookalike
verified: each step's gradient equals the gradient of that batch alone
"""
import torch
import torch.nn as nn
from torch import optim

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
optimizer = optim.RMSprop(model.parameters(), lr=1e-5, weight_decay=1e-8, momentum=0.999)
criterion = nn.BCEWithLogitsLoss()
for epoch in range(2):
    model.train()
    images, true_masks = torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2, 1, 8, 8)).float()
    masks_pred = model(images)
    loss = criterion(masks_pred, true_masks)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    expected = torch.autograd.grad(criterion(model(images), true_masks), model[0].weight)[0]
    assert torch.allclose(model[0].weight.grad, expected)
    optimizer.step()
print("ok")
