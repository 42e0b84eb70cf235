"""torch.multiprocessing.spawn of two gloo ranks running three wrong trainings that end without
an error, one after the other in one process group (one spawn instead of three: each spawn
starts two fresh interpreters that import torch and torch._dynamo). Each part is one of the
former scripts, unchanged but for the process group the parts share and the models kept alive
to the end of the worker (as in each script: a later part's object at a freed object's address
would meet gradtrace's tables keyed by id(), layout.py's registration sites among them); each
prints its own result line, read by its own test:

- ``bypass``: training runs the forward through the module inside DDP (a helper picks it), so
  DDP never all-reduces: the replicas drift apart (tests/distributed/test_spawn.py);
- ``bypass_method``: a trainer class wraps the model in DDP but computes the loss with a method
  of the inner module (``self.ddp.module.loss(x, y)``), whose ``self(x)`` runs the forward
  outside the wrapper (test_runtime22a_dist.py);
- ``order``: task heads registered in a different order on each rank (each rank reads its task
  list in its own order): DDP averages the `depth` head's gradient with the `normals` head's,
  silently (test_spawn.py).
"""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def unwrap(model):
    return model.module if isinstance(model, DDP) else model


def bypass(rank, world_size, results):
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
    results["bypass", rank] = model.module[0].weight.detach().clone()
    return model


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))

    def score(self, x):
        return self(x).squeeze(1)

    def loss(self, x, y):
        return F.mse_loss(self.score(x), y)


class Trainer:
    def __init__(self, rank):
        torch.manual_seed(0)
        self.ddp = DDP(Regressor())
        self.opt = torch.optim.Adam(self.ddp.parameters(), lr=1e-2)
        self.rank = rank

    def fit(self, steps=3):
        gen = torch.Generator().manual_seed(self.rank)
        for _ in range(steps):
            x, y = torch.randn(8, 4, generator=gen), torch.randn(8, generator=gen)
            self.opt.zero_grad()
            loss = self.ddp.module.loss(x, y)  # <- method_bypass
            loss.backward()
            self.opt.step()


def bypass_method(rank, world_size, results):
    trainer = Trainer(rank)
    trainer.fit()
    results["bypass_method", rank] = trainer.ddp.module.body.weight.detach().clone()
    return trainer


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


def order(rank, world_size, results):
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
    results["order", rank] = True
    return model


PARTS = (bypass, bypass_method, order)


def worker(rank, world_size, results):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    # each part's model lives until the worker ends, as it did in the part's own script: no later
    # part's module, parameter or wrapper can take the address (id) of an earlier part's
    kept = [part(rank, world_size, results) for part in PARTS]
    dist.destroy_process_group()
    del kept


if __name__ == "__main__":
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print("bypass: replicas equal:", torch.equal(results["bypass", 0], results["bypass", 1]))
    print("bypass_method: replicas equal:",
          torch.equal(results["bypass_method", 0], results["bypass_method", 1]))
    print("order: done", results["order", 0] and results["order", 1])
