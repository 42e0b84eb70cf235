"""torch.multiprocessing.spawn of two gloo ranks training a DDP model correctly."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size, results):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(rank)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    results[rank] = model.module[0].weight.detach().clone()
    dist.destroy_process_group()


if __name__ == "__main__":
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print("replicas equal:", torch.equal(results[0], results[1]))
