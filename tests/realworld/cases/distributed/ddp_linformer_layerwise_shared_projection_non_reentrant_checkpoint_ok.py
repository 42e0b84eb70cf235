"""Linformer with parameter_sharing="layerwise" under DDP, each layer checkpointed with use_reentrant=False: the non-reentrant checkpoint runs inside the one backward pass, so the shared E projection's gradient is accumulated and reduced once.

source: https://github.com/pytorch/pytorch/issues/46166
kind: lookalike
verified: two DDP steps run on two gloo ranks
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint


class LinearAttentionHead(nn.Module):
    def __init__(self, dim, E_proj):
        super().__init__()
        self.E = E_proj
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        q = self.to_q(x)
        k = self.E(self.to_k(x).transpose(1, 2)).transpose(1, 2)
        v = self.E(self.to_v(x).transpose(1, 2)).transpose(1, 2)
        attn = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return x + attn @ v


class Linformer(nn.Module):
    def __init__(self, input_size=12, dim=16, k=4, depth=2, parameter_sharing="layerwise", checkpoint_level="C2"):
        super().__init__()
        self.checkpoint_level = checkpoint_level
        E_proj = nn.Linear(input_size, k, bias=False)
        if parameter_sharing == "layerwise":
            self.layers = nn.ModuleList([LinearAttentionHead(dim, E_proj) for _ in range(depth)])
        else:
            self.layers = nn.ModuleList([LinearAttentionHead(dim, nn.Linear(input_size, k, bias=False))
                                         for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            if self.checkpoint_level == "C2":
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return x


def demo_basic(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29664'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(Linformer())
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    for step in range(2):
        x = torch.randn(4, 12, 16, requires_grad=True)
        labels = torch.randn(4, 12, 16)
        output = model(x)
        optimizer.zero_grad()
        loss_fn(output, labels).backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(demo_basic, args=(2,), nprocs=2, join=True)
