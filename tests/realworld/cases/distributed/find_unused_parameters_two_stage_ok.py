"""Two-stage detector whose refinement head is skipped some iterations, wrapped with find_unused_parameters=True.

source: https://github.com/open-mmlab/mmdetection3d/issues/488
kind: lookalike
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class PartA2(nn.Module):
    def __init__(self):
        super().__init__()
        self.rpn_head = nn.Linear(8, 4)
        self.roi_head = nn.Linear(4, 2)

    def forward(self, x, with_roi):
        proposals = self.rpn_head(x)
        if not with_roi:
            return proposals.pow(2).mean()
        return self.roi_head(torch.relu(proposals)).pow(2).mean()


def run(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29543'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(PartA2(), find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for it in range(3):
        loss = model(torch.randn(4, 8), with_roi=(it % 2 == 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(run, args=(2,), nprocs=2, join=True)
