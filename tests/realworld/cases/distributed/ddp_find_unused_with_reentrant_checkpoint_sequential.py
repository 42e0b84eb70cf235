"""The model runs its blocks through torch.utils.checkpoint.checkpoint_sequential (reentrant) and is wrapped in DDP with find_unused_parameters=True: the forward-time graph search cannot see inside the checkpoints, so it marks their parameters unused and ready, and the recomputed backward marks them ready a second time.

source: https://github.com/pytorch/pytorch/issues/24005
kind: bug
symptom: crash
verified: Expected to mark a variable ready only once
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential


class Model(nn.Module):
    def __init__(self, hps):
        super().__init__()
        self.hps = hps
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(hps['width'], hps['width']), nn.Tanh())
                                      for _ in range(hps['depth'])])
        self.head = nn.Linear(hps['width'], 1)

    def forward(self, x):
        if self.hps['checkpoint']:
            x = checkpoint_sequential(self.blocks, self.hps['segments'], x, use_reentrant=True)
        else:
            x = self.blocks(x)
        return self.head(x)


def train(rank, world_size, hps):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29671'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Model(hps), find_unused_parameters=True)  # ROOT
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(2):
        x = torch.randn(8, hps['width'], requires_grad=True)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()  # SYMPTOM
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    hps = {'width': 16, 'depth': 4, 'segments': 2, 'checkpoint': True}
    mp.spawn(train, args=(2, hps), nprocs=2, join=True)
