"""Gradient accumulation under DDP with no_sync() wrapping both the forward and the backward.

source: https://github.com/speechbrain/speechbrain/issues/1802
kind: lookalike
"""
import contextlib
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Brain:
    def __init__(self, modules, grad_accumulation_factor=2):
        self.modules = modules
        self.optimizer = torch.optim.Adam(modules.parameters(), lr=1e-3)
        self.grad_accumulation_factor = grad_accumulation_factor
        self.step = 0

    def no_sync(self, use=True):
        return self.modules.no_sync() if use else contextlib.nullcontext()

    def fit_batch(self, batch):
        self.step += 1
        should_step = self.step % self.grad_accumulation_factor == 0
        with self.no_sync(not should_step):
            x, y = batch
            loss = nn.functional.mse_loss(self.modules(x), y)
            (loss / self.grad_accumulation_factor).backward()
        if should_step:
            self.optimizer.step()
            self.optimizer.zero_grad()


def run(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29549'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    brain = Brain(DDP(nn.Linear(5, 1)))
    for _ in range(4):
        brain.fit_batch((torch.randn(4, 5), torch.randn(4, 1)))
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(run, args=(2,), nprocs=2, join=True)
