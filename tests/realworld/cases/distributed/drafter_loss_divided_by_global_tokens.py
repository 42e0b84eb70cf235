"""Drafter loss divides the local loss sum by the all-reduced token count; DDP then averages again.

source: https://github.com/verl-project/verl-SpeCo/pull/29
kind: bug
symptom: silent
verified: the synchronized gradient is 1/world_size of the global token-mean gradient
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_batch(rank):
    g = torch.Generator().manual_seed(rank)
    return torch.randn(5, 6, generator=g), torch.randint(0, 4, (5,), generator=g)


def _training_step_on_batch(model, batch):
    hidden, labels = batch
    loss_sum = nn.functional.cross_entropy(model(hidden), labels, reduction='sum')
    tokens = torch.tensor(float(labels.numel()))
    global_tokens = tokens.clone()
    dist.all_reduce(global_tokens)
    loss = loss_sum / global_tokens  # ROOT
    loss.backward()
    return loss


def worker(rank, world_size, results):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29541'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    drafter = DDP(nn.Linear(6, 4))
    _training_step_on_batch(drafter, make_batch(rank))
    results[rank] = drafter.module.weight.grad.clone()
    dist.destroy_process_group()


if __name__ == '__main__':
    results = mp.Manager().dict()
    mp.spawn(worker, args=(2, results), nprocs=2, join=True)
    print('synced grad norm:', results[0].norm().item())
