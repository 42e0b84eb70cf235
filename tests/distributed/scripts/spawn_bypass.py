"""torch.multiprocessing.spawn of two gloo ranks; training runs the forward through the module
inside DDP (a helper picks it), so DDP never all-reduces: the replicas drift apart."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def unwrap(model):
    return model.module if isinstance(model, DDP) else model


def worker(rank, world_size, results):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    net = unwrap(model)
    torch.manual_seed(rank)
    for _ in range(3):
        loss = net(torch.randn(8, 4)).pow(2).mean()  # <- bypass
        opt.zero_grad()
        loss.backward()
        opt.step()  # <- step
    with torch.no_grad():  # evaluation through the inner module is fine
        net(torch.randn(2, 4))
    results[rank] = model.module[0].weight.detach().clone()
    dist.destroy_process_group()


if __name__ == "__main__":
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print("replicas equal:", torch.equal(results[0], results[1]))
