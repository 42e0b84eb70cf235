"""The pytorch_warmup user's batch loop calls loss.backward(), then optimizer.zero_grad(), then optimizer.step() and the dampened lr_scheduler.step(): zero_grad (set_to_none) throws away the gradients just computed, so every AdamW step skips every parameter; the reporter saw "no warm-up", the model does not train at all.

source: https://github.com/Tony-Y/pytorch_warmup/issues/12
kind: bug
symptom: silent
verified: after 2 epochs of 10 batches the first conv weight has moved 0.0 (every .grad is None at step time) and the last batch's loss is 2.2997 in both epochs; with zero_grad before the forward pass (the maintainer's answer, the order of the package's example) conv1 moves 0.00808 and that loss goes 2.329 -> 2.296
"""
import math
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F


class LinearWarmup:
    """The few lines of pytorch_warmup.LinearWarmup the loop uses: dampening() scales the lr after the scheduler step."""

    def __init__(self, optimizer, warmup_period):
        self.optimizer = optimizer
        self.warmup_period = warmup_period
        self.last_step = 0
        self.lrs = [group["lr"] for group in optimizer.param_groups]
        self.dampen()

    def dampen(self):
        omega = min(1.0, (self.last_step + 1) / self.warmup_period)
        for group, lr in zip(self.optimizer.param_groups, self.lrs):
            group["lr"] = lr * omega

    @contextmanager
    def dampening(self):
        self.lrs = [group["lr"] for group in self.optimizer.param_groups]
        yield
        self.last_step += 1
        self.dampen()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(16 * 5 * 5, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, train_loader, optimizer, lr_scheduler, warmup_scheduler, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.zero_grad()  # ROOT
        optimizer.step()
        with warmup_scheduler.dampening():
            lr_scheduler.step()
    return loss


torch.manual_seed(0)
train_loader = [(torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(10)]
model = Net()
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, betas=(0.9, 0.999), weight_decay=0.01)
num_steps = len(train_loader) * 2
lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=num_steps)
warmup_scheduler = LinearWarmup(optimizer, warmup_period=5)
w0 = model.conv1.weight.detach().clone()
for epoch in range(1, 3):
    loss = train(model, train_loader, optimizer, lr_scheduler, warmup_scheduler, epoch)
    print("epoch", epoch, "loss", loss.item())
print("conv1 moved", (model.conv1.weight.detach() - w0).abs().max().item(), "lr", optimizer.param_groups[0]["lr"])
