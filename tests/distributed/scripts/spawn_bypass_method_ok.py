"""The look-alike of spawn_bypass_method.py: training runs the forward through the DDP wrapper
and the loss outside the module; only the validation uses the inner module's ``loss`` method,
under no_grad. The replicas stay equal."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))

    def loss(self, x, y):
        return F.mse_loss(self(x).squeeze(1), y)


def worker(rank, world_size, results):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    ddp = DDP(Regressor())
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(3):
        x, y = torch.randn(8, 4, generator=gen), torch.randn(8, generator=gen)
        opt.zero_grad()
        F.mse_loss(ddp(x).squeeze(1), y).backward()
        opt.step()
        with torch.no_grad():
            ddp.module.loss(x, y)
    results[rank] = ddp.module.body.weight.detach().clone()
    dist.destroy_process_group()


if __name__ == "__main__":
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print("replicas equal:", torch.equal(results[0], results[1]))
