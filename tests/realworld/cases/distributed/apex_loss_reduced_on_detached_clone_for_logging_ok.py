"""The same DDP loop with the loss reduced on a detached clone for logging only (manner 2 of the issue): each rank backpropagates its own loss and DDP's averaging gives the gradient of the global mean loss.

source: https://github.com/NVIDIA/apex/issues/664
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29754'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    img, target = torch.randn(2, 3, 8, 8, generator=gen), torch.randint(0, 4, (2, 8, 8), generator=gen)
    loss = F.cross_entropy(model(img), target)
    reduced_loss = loss.clone().detach()
    dist.all_reduce(reduced_loss, dist.ReduceOp.SUM)
    reduced_loss.div_(world_size)
    optimizer.zero_grad()
    loss.backward()
    grad_norm = model.module[0].weight.grad.norm().item()
    optimizer.step()
    if rank == 0:
        print('logged loss', round(reduced_loss.item(), 3), 'first conv grad norm', round(grad_norm, 3))
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
