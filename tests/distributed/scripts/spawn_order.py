"""torch.multiprocessing.spawn of two gloo ranks whose task heads are registered in a different
order (each rank reads its task list in its own order): DDP averages the `depth` head's
gradient with the `normals` head's, silently."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class MultiTask(nn.Module):
    def __init__(self, tasks):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.heads = nn.ModuleDict()
        for task in tasks:
            self.heads[task] = nn.Linear(8, 1)  # <- registered

    def forward(self, x):
        h = torch.relu(self.body(x))
        return {task: head(h) for task, head in self.heads.items()}


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    tasks = ["depth", "normals"] if rank == 0 else ["normals", "depth"]
    model = DDP(MultiTask(tasks))  # <- wrapped
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        out = model(torch.randn(8, 4))
        loss = out["depth"].pow(2).mean() + 0.1 * out["normals"].pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
