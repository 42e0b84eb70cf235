"""ToyModel all_gathers branch1's output inside forward and puts its own rank's output (with its autograd history) back into the gathered list, the usual fix, so branch1's parameters get gradients on every rank.

source: https://github.com/pytorch/pytorch/issues/40690
kind: lookalike
verified: two DDP steps run on two gloo ranks
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.stem = nn.Linear(10, 10)
        self.branch1 = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 10))
        self.branch2 = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 10))

    def forward(self, x):
        x1 = F.relu(self.stem(x))
        branch1 = self.branch1(x1[:10])
        branch2 = self.branch2(x1[10:])
        branch1_list = [torch.empty_like(branch1) for _ in range(dist.get_world_size())]
        dist.all_gather(branch1_list, branch1)
        branch1_list[dist.get_rank()] = branch1
        return torch.cat(branch1_list, dim=0), branch2


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29732'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(ToyModel())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2):
        inputs = torch.randn(20, 10)
        branch1, branch2 = model(inputs)
        loss = branch1.sum() + branch2.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2,), nprocs=2, join=True)
