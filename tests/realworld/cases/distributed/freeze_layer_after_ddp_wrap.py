"""Freezing backbone layers by requires_grad=False in the middle of DDP training breaks the reducer.

source: https://github.com/JDAI-CV/fast-reid/issues/178
kind: bug
symptom: crash
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Baseline(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(8, 8)
        self.heads = nn.Linear(8, 4)

    def forward(self, x):
        return self.heads(torch.relu(self.backbone(x)))


def freeze_backbone(model):
    for p in model.module.backbone.parameters():
        p.requires_grad = False  # ROOT


def main(rank, world_size, freeze_iters=1):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29539'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(Baseline())
    optimizer = torch.optim.Adam(model.parameters(), lr=3.5e-4)
    for iteration in range(3):
        if iteration == freeze_iters:
            freeze_backbone(model)
        x, y = torch.randn(4, 8), torch.randint(0, 4, (4,))
        loss = nn.functional.cross_entropy(model(x), y)  # SYMPTOM
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
