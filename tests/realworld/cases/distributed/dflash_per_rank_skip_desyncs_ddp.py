"""DFlash trainer skips a micro-batch on one rank only (no valid anchors) with a per-rank continue.

source: https://github.com/NVIDIA-NeMo/Automodel/pull/2468
kind: bug
symptom: crash
verified: Connection closed by peer
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class NoValidAnchorsError(Exception):
    pass


class DFlashTrainer:
    def __init__(self, drafter):
        self.drafter = drafter
        self.optimizer = torch.optim.AdamW(drafter.parameters(), lr=1e-4)

    def step(self, hidden, seq_len, block_size=4):
        if seq_len < block_size:
            raise NoValidAnchorsError()
        self.optimizer.zero_grad()
        loss = self.drafter(hidden).pow(2).mean()
        loss.backward()
        self.optimizer.step()


def run(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29555'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    trainer = DFlashTrainer(DDP(nn.Linear(8, 8)))
    seq_lens = [6, 6, 6] if rank == 0 else [2, 6, 6]
    for seq_len in seq_lens:
        try:
            trainer.step(torch.randn(4, 8), seq_len)  # SYMPTOM
        except NoValidAnchorsError:
            continue  # ROOT
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(run, args=(2,), nprocs=2, join=True)
