"""Rank 1 skips one training step (`continue`): the next all-reduce on rank 0 never completes."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

# Set-up on a patient group: under load one rank can reach DDP's first collectives seconds
# after the other. Only the training collectives below use the 4 s timeout.
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
rank = dist.get_rank()
DDP(nn.Linear(1, 1))  # torch's lazy imports for DDP, on the patient group
quick = dist.new_group(timeout=timedelta(seconds=4))
dist.barrier()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), process_group=quick)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()  # <- forward
    if rank == 1 and step == 1:
        continue  # skips backward and step on rank 1 only
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
