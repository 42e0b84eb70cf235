"""torch.multiprocessing.spawn of two gloo ranks; a trainer class wraps the model in DDP but
computes the loss with a method of the inner module (``self.ddp.module.loss(x, y)``), whose
``self(x)`` runs the forward outside the wrapper: DDP never all-reduces."""
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
            loss = self.ddp.module.loss(x, y)  # <- bypass
            loss.backward()
            self.opt.step()


def worker(rank, world_size, results):
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=20))
    trainer = Trainer(rank)
    trainer.fit()
    results[rank] = trainer.ddp.module.body.weight.detach().clone()
    dist.destroy_process_group()


if __name__ == "__main__":
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print("replicas equal:", torch.equal(results[0], results[1]))
