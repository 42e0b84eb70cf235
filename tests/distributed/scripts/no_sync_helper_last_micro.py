"""Accumulation through a helper context that enters no_sync() on every micro-batch but the
first, so the last micro-batch before each step is never all-reduced; the flag stays off
from the forward through the backward (no late assignment)."""
from contextlib import contextmanager, nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=timedelta(seconds=20))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
accum = 2


@contextmanager
def accumulating(module, sync):
    with (nullcontext() if sync else module.no_sync()):
        yield


for i in range(6):
    with accumulating(model, sync=i % accum == 0):
        (model(torch.randn(8, 4, generator=gen)).pow(2).mean() / accum).backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
copies = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
dist.all_gather(copies, flat)
if rank == 0:  # one line: the ranks' prints would interleave
    print("replicas equal:", all(torch.equal(copies[0], c) for c in copies))
dist.destroy_process_group()
