"""torchvision detection reference: a warmup LambdaLR is stepped every iteration of the first epoch inside train_one_epoch, and the main MultiStepLR once per epoch.

source: https://github.com/pytorch/vision/issues/1261
kind: lookalike
verified: the lr ramps from 1e-4 to 0.01 over the 4 warmup iterations of epoch 0, then is 0.01 for epoch 1 and 0.001 for epoch 2
"""
import torch
import torch.nn as nn


def warmup_lr_scheduler(optimizer, warmup_iters, warmup_factor):
    def f(x):
        if x >= warmup_iters:
            return 1
        alpha = float(x) / warmup_iters
        return warmup_factor * (1 - alpha) + alpha
    return torch.optim.lr_scheduler.LambdaLR(optimizer, f)


def train_one_epoch(model, optimizer, data_loader, epoch, lrs):
    model.train()
    lr_scheduler = None
    if epoch == 0:
        warmup_factor = 1. / 100
        warmup_iters = min(1000, len(data_loader) - 1)
        lr_scheduler = warmup_lr_scheduler(optimizer, warmup_iters, warmup_factor)
    for images, targets in data_loader:
        lrs.append(optimizer.param_groups[0]["lr"])
        losses = nn.functional.smooth_l1_loss(model(images), targets)
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        if lr_scheduler is not None:
            lr_scheduler.step()


torch.manual_seed(0)
model = nn.Linear(6, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.1)
data_loader = [(torch.randn(2, 6), torch.randn(2, 4)) for _ in range(5)]
lrs = []
for epoch in range(3):
    train_one_epoch(model, optimizer, data_loader, epoch, lrs)
    lr_scheduler.step()
print([round(lr, 6) for lr in lrs])
