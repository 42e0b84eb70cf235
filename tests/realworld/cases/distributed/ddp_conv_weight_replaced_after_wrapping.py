"""A new nn.Parameter is assigned to the conv weight after DistributedDataParallel was built; DDP's reducer still hooks the old one.

source: https://github.com/pytorch/pytorch/issues/12603
kind: bug
symptom: silent
verified: after 3 steps the two ranks hold different conv weights (max abs difference 0.83); 0.0 when the weight is assigned before wrapping
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, bias=False)

    def forward(self, x):
        return self.conv(x).mean((1, 2, 3))


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29641'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(Net())
    model.module.conv.weight = nn.Parameter(torch.ones(2, 1, 3, 3))  # ROOT
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    torch.manual_seed(100 + rank)
    for _ in range(3):
        x, y = torch.randn(4, 1, 6, 6), torch.randn(4)
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    w = model.module.conv.weight.detach().clone()
    ws = [torch.zeros_like(w) for _ in range(world_size)]
    dist.all_gather(ws, w)
    if rank == 0:
        print((ws[0] - ws[1]).abs().max().item())
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
