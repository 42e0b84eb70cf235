"""ltp-megatron-lm's global-batch load-balancing loss calls torch.distributed.nn.all_reduce(routing_count) and discards the result: the autograd-aware all_reduce is not in-place, so routing_count stays each rank's local count and the auxiliary loss balances experts per rank instead of over the global batch.

source: https://github.com/microsoft/ltp-megatron-lm/pull/68
kind: bug
symptom: silent
verified: with 2 gloo ranks rank 0's routing_count after the call is its local [0, 11, 10, 11] instead of the global [3, 20, 18, 23], the aux loss is 1.0583 instead of 1.0506 and the router weight's gradient has norm 0.149 instead of 0.126; dist.all_reduce(routing_count) in place (the pull request) gives the global counts
"""
import os

import torch
import torch.distributed as dist
import torch.distributed.nn
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def load_balancing_loss(router_logits, num_experts, topk=1):
    probs = F.softmax(router_logits, dim=-1)
    routing_map = F.one_hot(probs.topk(topk, dim=-1).indices[:, 0], num_experts)
    routing_count = routing_map.sum(0).float()
    torch.distributed.nn.all_reduce(routing_count)  # ROOT
    tokens = routing_count.sum()
    aux = num_experts * (probs.mean(0) * routing_count / tokens).sum()
    return aux, routing_count


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29757'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    router = nn.Linear(8, 4, bias=False)
    gen = torch.Generator().manual_seed(10 + rank)
    tokens = torch.randn(32, 8, generator=gen)
    aux, routing_count = load_balancing_loss(router(tokens), 4)
    aux.backward()
    if rank == 0:
        print(routing_count.tolist(), round(aux.item(), 4), router.weight.grad.norm().item())
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
