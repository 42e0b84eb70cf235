"""Workers seeded differently before building the model: DDP's constructor broadcasts rank 0's weights.

source: https://github.com/sparticlesteve/pytorch-benchmarks/pull/1
kind: lookalike
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def main(rank, world_size, results):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29545'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(rank)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(4, 6), torch.randint(0, 2, (4,))
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    results[rank] = model.module[0].weight.detach().clone()
    dist.destroy_process_group()


if __name__ == '__main__':
    results = mp.Manager().dict()
    mp.spawn(main, args=(2, results), nprocs=2, join=True)
    print('replicas equal:', torch.equal(results[0], results[1]))
