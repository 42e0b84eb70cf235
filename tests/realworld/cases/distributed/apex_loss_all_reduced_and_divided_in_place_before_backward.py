"""A segmentation training loop under DistributedDataParallel averages the loss across ranks for logging with dist.all_reduce(loss) and loss.div_(world_size) before loss.backward(): all_reduce is not recorded by autograd but the in-place division is, so every rank backpropagates its local loss divided by world_size and DDP then averages again, halving the gradients on 2 ranks (an lr silently divided by the world size).

source: https://github.com/NVIDIA/apex/issues/664
kind: bug
symptom: silent
verified: with 2 gloo ranks the synchronised gradient of the first conv has norm 0.047 against 0.094 when the loss is reduced on a detached clone for logging (manner 2 of the issue), a ratio of exactly 1/world_size; the logged loss is the same 1.42 in both forms, and torch 2.13 only warns that c10d::allreduce_ has no autograd kernel
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
    os.environ['MASTER_PORT'] = '29753'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    img, target = torch.randn(2, 3, 8, 8, generator=gen), torch.randint(0, 4, (2, 8, 8), generator=gen)
    loss = F.cross_entropy(model(img), target)
    dist.all_reduce(loss, dist.ReduceOp.SUM)
    loss.div_(world_size)  # ROOT
    optimizer.zero_grad()
    loss.backward()
    grad_norm = model.module[0].weight.grad.norm().item()
    optimizer.step()
    if rank == 0:
        print('logged loss', round(loss.item(), 3), 'first conv grad norm', round(grad_norm, 3))
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
