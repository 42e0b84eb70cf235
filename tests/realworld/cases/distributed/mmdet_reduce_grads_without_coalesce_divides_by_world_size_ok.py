"""mmdetection after commit 143a837: the uncoalesced path of `reduce_grads` divides each gradient by the world size in place before `dist.all_reduce`, so DistOptimizerHook with `coalesce=False` applies the mean gradient over the ranks, like the coalesced path.

source: https://github.com/youtubevos/MaskTrackRCNN/commit/143a8372c54da682a51bdb371bc0ba7aab909390
kind: lookalike
"""
import os
from collections import OrderedDict

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.nn.utils import clip_grad

WORLD_SIZE = 2


def all_reduce_coalesced(tensors):
    buckets = OrderedDict()
    for tensor in tensors:
        tp = tensor.type()
        if tp not in buckets:
            buckets[tp] = []
        buckets[tp].append(tensor)
    for tp in buckets:
        bucket = buckets[tp]
        coalesced = _flatten_dense_tensors(bucket)
        dist.all_reduce(coalesced)
        coalesced /= dist.get_world_size()
        for buf, synced in zip(bucket, _unflatten_dense_tensors(coalesced, bucket)):
            buf.copy_(synced)


def reduce_grads(model, coalesce=True):
    grads = [param.grad.data for param in model.parameters() if param.requires_grad and param.grad is not None]
    if coalesce:
        all_reduce_coalesced(grads)
    else:
        world_size = dist.get_world_size()
        for tensor in grads:
            dist.all_reduce(tensor.div_(world_size))


class DistOptimizerHook:
    def __init__(self, grad_clip=None, coalesce=True):
        self.grad_clip = grad_clip
        self.coalesce = coalesce

    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs["loss"].backward()
        reduce_grads(runner.model, self.coalesce)
        if self.grad_clip is not None:
            clip_grad.clip_grad_norm_(filter(lambda p: p.requires_grad, runner.model.parameters()), **self.grad_clip)
        runner.optimizer.step()


class Runner:
    def __init__(self, model, optimizer):
        self.model, self.optimizer, self.outputs = model, optimizer, {}


def make_data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)


def worker(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    torch.manual_seed(0)  # same initial weights on every rank, as after mmcv's broadcast
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    runner = Runner(model, torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9))
    hook = DistOptimizerHook(grad_clip=None, coalesce=False)  # optimizer_config = dict(grad_clip=None, coalesce=False)

    x, y = make_data()
    # measurement: the gradient of the mean loss over the global batch, before the step
    reference = torch.autograd.grad(nn.functional.mse_loss(model(x), y), list(model.parameters()))
    shard = slice(rank * 8, (rank + 1) * 8)
    runner.outputs["loss"] = nn.functional.mse_loss(model(x[shard]), y[shard])
    hook.after_train_iter(runner)

    if rank == 0:
        ratios = [(p.grad.norm() / r.norm()).item() for p, r in zip(model.parameters(), reference)]
        print(f"reduced gradient / gradient of the global mean loss: {min(ratios):.2f}..{max(ratios):.2f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.start_processes(worker, args=(29632,), nprocs=WORLD_SIZE, start_method="fork")
