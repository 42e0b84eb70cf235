"""Model under DDP adds its output head to the loss only `if flag:`, and DDP is built with find_unused_parameters=True.

source: https://github.com/facebookresearch/detectron2/issues/1120
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.box_head = nn.Linear(8, 1)
        self.output = nn.Linear(8, 1)

    def forward(self, x, flag):
        x = torch.relu(self.body(x))
        loss = self.box_head(x).pow(2).mean()
        if flag:
            loss += self.output(x).pow(2).mean()
        return loss


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29654'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(Net(), find_unused_parameters=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for iteration in range(3):
        x = torch.randn(4, 8)
        loss = model(x, flag=(iteration % 2 == 0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
