"""Accumulation whose context is picked into a name: no_sync on every micro-batch but the first
(FunASR before PR 3472), so the last micro-batch before each step is never all-reduced."""
from contextlib import nullcontext
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


def forward_backward(x):
    (model(x).pow(2).mean() / accum).backward()


for i in range(6):
    context = nullcontext
    context = model.no_sync if i % accum != 0 else context  # <- choice
    with context():
        forward_backward(torch.randn(8, 4, generator=gen))
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
copies = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
dist.all_gather(copies, flat)
if rank == 0:  # one line: the ranks' prints would interleave
    print("replicas equal:", all(torch.equal(copies[0], c) for c in copies))
dist.destroy_process_group()
