"""DDP with static_graph=True around a model whose second output never reaches the loss.

source: https://github.com/pytorch/pytorch/issues/79171
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


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv3d(1, 1, 1)
        self.b = nn.Conv3d(1, 1, 1)

    def forward(self, x):
        return self.a(x), self.b(x)


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29573'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    m = M()
    ddp = DistributedDataParallel(m, static_graph=True)  # ROOT
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x = torch.zeros(1, 1, 1, 1, 1)
    for i in range(5):
        a, b = ddp(x)  # SYMPTOM
        l = a.sum()
        optimizer.zero_grad()
        l.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
