"""icefall's HuBERT fine-tuning train_one_epoch after PR #1693: the end-of-epoch check `if sub_batch_idx % params.accum_grad != params.accum_grad - 1` looks at the last sub-batch's index, so the gradient of an incomplete accumulation window is cleared and the next epoch's first step starts from zero gradients.

source: https://github.com/k2-fsa/icefall/pull/1693
kind: lookalike
"""
from types import SimpleNamespace

import torch
from torch import nn


def compute_loss(params, model, batch, is_training=True):  # stands for the CTC loss of the HuBERT encoder
    loss = nn.functional.cross_entropy(model(batch["inputs"]), batch["supervisions"]["text"], reduction="sum")
    return loss, {"loss": loss.detach().item(), "frames": batch["inputs"].shape[0]}


class Eden:  # icefall's optim.Eden: the learning rate is set per optimizer step from the batch count
    def __init__(self, optimizer, lr_batches=7500):
        self.optimizer, self.lr_batches = optimizer, lr_batches
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]

    def step_batch(self, batch):
        factor = ((batch ** 2 + self.lr_batches ** 2) / self.lr_batches ** 2) ** -0.25
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base_lr * factor


def train_one_epoch(params, model, optimizer, scheduler, train_dl, scaler, tb_writer=None):
    model.train()
    for sub_batch_idx, batch in enumerate(train_dl):
        params.sub_batch_idx_train += 1
        batch_idx = sub_batch_idx // params.accum_grad

        with torch.autocast("cpu", enabled=params.use_fp16):
            loss, loss_info = compute_loss(params=params, model=model, batch=batch, is_training=True)
        scaler.scale(loss / params.accum_grad).backward()

        if sub_batch_idx % params.accum_grad == params.accum_grad - 1:
            params.batch_idx_train += 1
            scheduler.step_batch(params.batch_idx_train)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        else:
            continue

    if sub_batch_idx % params.accum_grad != params.accum_grad - 1:
        optimizer.zero_grad()


torch.manual_seed(0)
params = SimpleNamespace(accum_grad=2, use_fp16=False, sub_batch_idx_train=0, batch_idx_train=0)
model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scheduler = Eden(optimizer)
scaler = torch.amp.GradScaler("cpu", enabled=params.use_fp16)
train_dl = [{"inputs": torch.randn(4, 12), "supervisions": {"text": torch.randint(0, 5, (4,))}} for _ in range(7)]
for epoch in range(2):
    leftover = sum(p.grad.abs().sum().item() for p in model.parameters() if p.grad is not None)
    print(f"epoch {epoch}: sum of |grad| before the first backward", round(leftover, 4))
    train_one_epoch(params, model, optimizer, scheduler, train_dl, scaler)
