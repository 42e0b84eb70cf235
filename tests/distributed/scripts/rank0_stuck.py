"""Rank 0 is stuck (a long sleep) while rank 1 waits in the all-reduce and times out."""
import time
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
    loss = model(torch.randn(8, 4)).pow(2).mean()
    if rank == 0 and step == 1:
        time.sleep(15)  # <- stuck
    opt.zero_grad()
    loss.backward()  # <- times out
    opt.step()
dist.destroy_process_group()
