"""torch.multiprocessing.spawn of two gloo ranks: a two-output model whose auxiliary output
this stage of training ignores, wrapped with find_unused_parameters=True (correct)."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.main_out = nn.Linear(8, 1)
        self.aux_out = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.main_out(h), self.aux_out(h)


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    model = DDP(TwoOutputs(), find_unused_parameters=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(rank)
    for _ in range(3):
        pred, _aux = model(torch.randn(8, 4))
        loss = pred.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
    print("done")
