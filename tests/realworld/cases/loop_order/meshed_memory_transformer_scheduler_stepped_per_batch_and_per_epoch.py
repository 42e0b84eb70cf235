"""meshed-memory-transformer train_xe: the warmup LambdaLR (lr = d_model^-0.5 * min(it^-0.5, it * warmup^-1.5)) is stepped after every batch, and scheduler.step() is called once more at the end of each epoch, so the schedule runs ahead by one iteration per epoch and no longer follows the intended per-iteration warmup.

source: https://github.com/aimagelab/meshed-memory-transformer/issues/71
kind: bug
symptom: silent
verified: after 3 epochs of 10 batches the scheduler has advanced 33 steps instead of 30 and the learning rate differs from the per-iteration schedule value
"""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import LambdaLR


def lambda_lr(s, d_model=512, warmup=10000):
    s += 1
    return (d_model ** -.5) * min(s ** -.5, s * warmup ** -1.5)


def train_xe(model, dataloader, optim, scheduler, loss_fn):
    model.train()
    running_loss = .0
    for it, (detections, captions) in enumerate(dataloader):
        out = model(detections)
        optim.zero_grad()
        loss = loss_fn(out, captions)
        loss.backward()
        optim.step()
        running_loss += loss.item()
        scheduler.step()
    loss = running_loss / len(dataloader)
    scheduler.step()  # ROOT
    return loss


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
optim = torch.optim.Adam(model.parameters(), lr=1, betas=(0.9, 0.98))
scheduler = LambdaLR(optim, lambda_lr)
dataloader = [(torch.randn(8, 16), torch.randint(0, 10, (8,))) for _ in range(10)]
for e in range(3):
    train_loss = train_xe(model, dataloader, optim, scheduler, nn.CrossEntropyLoss())
print(scheduler.last_epoch, optim.param_groups[0]['lr'], lambda_lr(30))
