"""Two gloo ranks forked by torch.multiprocessing (start_method="fork"); each averages the
gradients by hand after backward. Here the all-reduce sums them and nothing divides by the
world size: every rank steps with twice the mean gradient (no error). NOTE [forked ranks]."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

def reduce_gradients(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)  # <- summed


def worker(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4) + rank
    for _ in range(2):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        reduce_gradients(model)
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    mp.start_processes(worker, args=(int(os.environ["MASTER_PORT"]),), nprocs=2,
                       start_method="fork")
    print("done")
