"""Accumulation that sets DDP's sync flag after the forward (build-nanogpt before PR 30): the
last micro-batch's forward still read False, so no backward before a step is all-reduced."""
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

for step in range(3):
    for micro in range(accum):
        loss = model(torch.randn(8, 4, generator=gen)).pow(2).mean() / accum
        model.require_backward_grad_sync = micro == accum - 1  # <- flag
        loss.backward()
    opt.step()
    opt.zero_grad()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
copies = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
dist.all_gather(copies, flat)
if rank == 0:  # one line: the ranks' prints would interleave
    print("replicas equal:", all(torch.equal(copies[0], c) for c in copies))
dist.destroy_process_group()
