"""torch.multiprocessing.spawn of two gloo ranks running four correct trainings one after the
other in one process group, each silent under ``gradtrace run`` (one spawn instead of four: each
spawn starts two fresh interpreters that import torch and torch._dynamo). Each part is one of
the former scripts, unchanged but for the process group the parts share and the models kept
alive to the end of the worker (as in each script); each prints its own result line, read by its
own test:

- ``correct``: a DDP model trained correctly (tests/distributed/test_spawn.py);
- ``declared_unused``: a two-output model whose auxiliary output this stage ignores, wrapped
  with find_unused_parameters=True (test_spawn.py);
- ``method_ok``: the look-alike of spawn_bypass_method.py: the forward runs through the DDP
  wrapper and the loss outside the module; only the validation uses the inner module's
  ``loss`` method, under no_grad (test_runtime22a_dist.py);
- ``gather_slot_ok``: a contrastive helper gathers the embeddings with dist.all_gather and puts
  the rank's own embedding back into its slot, the graph kept (test_lead_s28_dist.py).
"""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def correct(rank, world_size, results):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(rank)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    results["correct", rank] = model.module[0].weight.detach().clone()
    return model


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.main_out = nn.Linear(8, 1)
        self.aux_out = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.main_out(h), self.aux_out(h)


def declared_unused(rank, world_size, results):
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
    results["declared_unused", rank] = True
    return model


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))

    def loss(self, x, y):
        return F.mse_loss(self(x).squeeze(1), y)


def method_ok(rank, world_size, results):
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
    results["method_ok", rank] = ddp.module.body.weight.detach().clone()
    return ddp


class GatheredContrast(nn.Module):
    def __init__(self, world_size):
        super().__init__()
        self.world_size = world_size

    def forward(self, emb):
        parts = [torch.empty_like(emb) for _ in range(self.world_size)]
        dist.all_gather(parts, emb)
        parts[dist.get_rank()] = emb
        emb = torch.cat(parts)
        sim = emb @ emb.t()
        return F.cross_entropy(sim, torch.arange(sim.size(0)))


def gather_slot_ok(rank, world_size, results):
    torch.manual_seed(0)
    model = DDP(nn.Linear(6, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = GatheredContrast(world_size)
    for _ in range(2):
        loss = criterion(F.normalize(model(torch.randn(5, 6)), dim=1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    results["gather_slot_ok", rank] = True
    return model


PARTS = (correct, declared_unused, method_ok, gather_slot_ok)


def worker(rank, world_size, results):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    # each part's model lives until the worker ends, as it did in the part's own script: no later
    # part's module, parameter or wrapper can take the address (id) of an earlier part's
    # (gradtrace keys some of its tables by id(): spawn_silent_bugs.py's docstring)
    kept = [part(rank, world_size, results) for part in PARTS]
    dist.destroy_process_group()
    del kept


if __name__ == "__main__":
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print("correct: replicas equal:", torch.equal(results["correct", 0], results["correct", 1]))
    print("declared_unused: done", results["declared_unused", 0] and results["declared_unused", 1])
    print("method_ok: replicas equal:",
          torch.equal(results["method_ok", 0], results["method_ok", 1]))
    print("gather_slot_ok: done", results["gather_slot_ok", 0] and results["gather_slot_ok", 1])
