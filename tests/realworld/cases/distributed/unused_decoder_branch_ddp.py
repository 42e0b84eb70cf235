"""DDP training with a layer defined in __init__ but unused in forward fails at the next iteration.

source: https://github.com/ImprintLab/MedSegDiff/issues/27
kind: bug
symptom: crash
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class UNetModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        self.highway = nn.Linear(8, 8)  # ROOT
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(torch.relu(self.encoder(x)))


def run(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29531'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(UNetModel())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(2):
        x = torch.randn(4, 8)
        loss = model(x).pow(2).mean()  # SYMPTOM
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(run, args=(2,), nprocs=2, join=True)
