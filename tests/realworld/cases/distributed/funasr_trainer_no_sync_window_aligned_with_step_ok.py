"""FunASR's Trainer.train_epoch (trainer_ds.py) after PR #3472: model.no_sync() is entered when `(batch_idx + 1) % accum_grad != 0`, the same window update_step uses, so the early micro-batches accumulate locally and the last one, right before the optimizer step, is all-reduced: the DDP replicas stay identical.

source: https://github.com/modelscope/FunASR/pull/3472
kind: lookalike
"""
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TinyASRModel(nn.Module):  # stands for a FunASR model: forward returns (loss, stats, weight)
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, speech, text):
        loss = nn.functional.cross_entropy(self.encoder(speech), text)
        return loss, {"loss": loss.detach()}, speech.shape[0]


class Trainer:  # validation, checkpoints, logging, autocast and the scaler left out
    def __init__(self, accum_grad=2, use_ddp=True):
        self.accum_grad, self.use_ddp, self.use_fsdp = accum_grad, use_ddp, False

    def train_epoch(self, model=None, optim=None, scheduler=None, dataloader_train=None, epoch=None):
        model.train()
        accum_grad = self.accum_grad
        optim.zero_grad()
        for batch_idx, batch in enumerate(dataloader_train):
            loss_dict = {"epoch": epoch, "batch_idx": batch_idx}
            my_context = nullcontext
            if self.use_ddp or self.use_fsdp:
                my_context = model.no_sync if (batch_idx + 1) % accum_grad != 0 else my_context
            with my_context():
                self.forward_step(model, batch, loss_dict=loss_dict)
                self.backward_step(model, None, loss_dict=loss_dict)
            self.update_step(model, optim, scheduler, None, loss_dict=loss_dict)

    def forward_step(self, model, batch, loss_dict={}):
        retval = model(**batch)
        loss, stats, weight = retval
        loss_dict["loss"], loss_dict["stats"], loss_dict["weight"] = loss, stats, weight

    def backward_step(self, model, scaler, loss_dict={}):
        scaled_loss = loss_dict["loss"] / self.accum_grad
        scaled_loss.backward()

    def update_step(self, model, optim, scheduler, scaler, loss_dict=None):
        batch_idx = loss_dict["batch_idx"]
        if (batch_idx + 1) % self.accum_grad == 0:
            optim.step()
            scheduler.step()
            optim.zero_grad(set_to_none=True)


def run(rank, world_size):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29564"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(TinyASRModel())
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: 1.0)
    g = torch.Generator().manual_seed(100 + rank)  # each rank reads its own shard
    dataloader_train = [{"speech": torch.randn(6, 8, generator=g), "text": torch.randint(0, 4, (6,), generator=g)}
                        for _ in range(4)]
    Trainer(accum_grad=2).train_epoch(model=model, optim=optim, scheduler=scheduler,
                                      dataloader_train=dataloader_train, epoch=0)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world_size)]
    dist.all_gather(gathered, flat)
    if rank == 0:
        print("max parameter difference between the two replicas:", (gathered[0] - gathered[1]).abs().max().item())
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(2,), nprocs=2, join=True)
