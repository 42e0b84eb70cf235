"""torch.multiprocessing.spawn of gloo ranks; a contrastive helper gathers the embeddings with
dist.all_gather, puts the rank's own embedding back into its slot (the graph is kept) and
trains (correct)."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class GatheredContrast(nn.Module):
    def __init__(self, world_size):
        super().__init__()
        self.world_size = world_size

    def forward(self, emb):
        parts = [torch.empty_like(emb) for _ in range(self.world_size)]
        dist.all_gather(parts, emb)
        parts[dist.get_rank()] = emb
        emb = torch.cat(parts)
        sim = emb @ emb.t()
        return F.cross_entropy(sim, torch.arange(sim.size(0)))


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    model = DDP(nn.Linear(6, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = GatheredContrast(world_size)
    for _ in range(2):
        loss = criterion(F.normalize(model(torch.randn(5, 6)), dim=1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
