"""FocalNet/Swin-style backbone with use_checkpoint: every block runs through torch.utils.checkpoint.checkpoint (reentrant), and the model is wrapped in DDP with find_unused_parameters=True; the reentrant backward fires each parameter's autograd hook a second time and DDP refuses it.

source: https://github.com/microsoft/FocalNet/issues/4
kind: bug
symptom: crash
verified: Expected to mark a variable ready only once
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.utils.checkpoint as checkpoint
from torch.nn.parallel import DistributedDataParallel


class FocalNetBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class BasicLayer(nn.Module):
    def __init__(self, dim, depth, use_checkpoint=False):
        super().__init__()
        self.use_checkpoint = use_checkpoint
        self.blocks = nn.ModuleList([FocalNetBlock(dim) for _ in range(depth)])

    def forward(self, x):
        for blk in self.blocks:
            if self.use_checkpoint:
                x = checkpoint.checkpoint(blk, x, use_reentrant=True)  # ROOT
            else:
                x = blk(x)
        return x


class FocalNet(nn.Module):
    def __init__(self, dim=16, num_classes=4, use_checkpoint=True):
        super().__init__()
        self.patch_embed = nn.Linear(8, dim)
        self.layers = nn.ModuleList([BasicLayer(dim, 2, use_checkpoint) for _ in range(2)])
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29615'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(FocalNet(), find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(2):
        x, y = torch.randn(4, 6, 8), torch.randint(0, 4, (4,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # SYMPTOM
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2,), nprocs=2, join=True)
