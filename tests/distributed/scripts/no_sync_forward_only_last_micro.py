"""Accumulation with only the forward inside `with model.no_sync():` on every micro-batch but
the first (DDP reads the flag at the forward, so the backward after the block is not reduced
either): the last micro-batch before each step is never all-reduced, and the flag is on again
when that backward begins. The `with` is the line to change, not a late assignment."""
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


for i in range(6):
    x = torch.randn(8, 4, generator=gen)
    if i % accum == 0:
        out = model(x)
    else:
        with model.no_sync():  # <- block
            out = model(x)
    (out.pow(2).mean() / accum).backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
copies = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
dist.all_gather(copies, flat)
if rank == 0:  # one line: the ranks' prints would interleave
    print("replicas equal:", all(torch.equal(copies[0], c) for c in copies))
dist.destroy_process_group()
