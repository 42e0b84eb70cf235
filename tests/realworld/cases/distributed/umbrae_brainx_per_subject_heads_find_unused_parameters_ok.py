"""The per-subject BrainX heads under DistributedDataParallel(find_unused_parameters=True): the heads a batch does not use are marked ready after the forward, and the four single-subject iterations train.

source: https://github.com/weihaox/UMBRAE/issues/4
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

SUBJ_VOXELS = {1: 40, 2: 36, 5: 32, 7: 28}


class BrainX(nn.Module):
    def __init__(self, subjects=(1, 2, 5, 7), hidden=24, out_dim=16):
        super().__init__()
        self.lin1 = nn.ModuleDict({f'fmri{s}': nn.Linear(SUBJ_VOXELS[s], hidden) for s in subjects})
        self.lin2 = nn.ModuleDict({f'fmri{s}': nn.Linear(hidden, hidden) for s in subjects})
        self.backbone = nn.Sequential(nn.GELU(), nn.Linear(hidden, out_dim))

    def forward(self, voxel, subj):
        x = F.gelu(self.lin1[f'fmri{subj}'](voxel))
        x = self.lin2[f'fmri{subj}'](x)
        return self.backbone(x)


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29733'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    brainx = BrainX()
    model = DistributedDataParallel(brainx, find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for it, subj in enumerate([1, 2, 5, 7]):
        voxel, clip_target = torch.randn(4, SUBJ_VOXELS[subj]), torch.randn(4, 16)
        clip_pred = model(voxel, subj)
        loss = F.mse_loss(clip_pred, clip_target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
