"""SimCLR NT-Xent across processes, second approach of the thread: after dist.all_gather the slot of the local rank is overwritten with the local embeddings, so the loss keeps its graph to this rank's encoder (DDP averages the gradients).

source: https://discuss.pytorch.org/t/dist-all-gather-and-gradient-preservation-in-multi-gpu-training/120696
kind: lookalike
verified: the loss has a grad_fn on both ranks, every encoder weight gets a gradient and changes after the step
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


class NT_Xent(nn.Module):
    def __init__(self, batch_size, temperature, world_size):
        super().__init__()
        self.batch_size = batch_size
        self.temperature = temperature
        self.world_size = world_size

    def forward(self, z_i, z_j):
        z = torch.cat((z_i, z_j), dim=0)
        if self.world_size > 1:
            gathered = [torch.zeros_like(z) for _ in range(self.world_size)]
            dist.all_gather(gathered, z)
            gathered[dist.get_rank()] = z
            z = torch.cat(gathered, dim=0)
        sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / self.temperature
        n = z.size(0)
        sim = sim.masked_fill(torch.eye(n, dtype=torch.bool), -1e9)
        labels = torch.arange(n).roll(n // 2)
        return F.cross_entropy(sim, labels)


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29614'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    encoder = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)))
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    criterion = NT_Xent(batch_size=4, temperature=0.5, world_size=world_size)
    for step in range(2):
        x = torch.randn(4, 16)
        x_i, x_j = x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)
        loss = criterion(encoder(x_i), encoder(x_j))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2,), nprocs=2, join=True)
