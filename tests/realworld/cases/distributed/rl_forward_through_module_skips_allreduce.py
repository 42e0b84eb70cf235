"""GRPO trainer wraps the policy in DDP but runs the loss forward through model.module; no all-reduce.

source: https://github.com/jingyaogong/minimind/pull/854
kind: bug
symptom: silent
verified: after one step the policy weights differ between rank 0 and rank 1 (gradients never averaged)
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.lm_head = nn.Linear(8, 5)

    def forward(self, x):
        return self.lm_head(torch.tanh(self.body(x)))


def train_grpo(rank, world_size, results):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29537'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DistributedDataParallel(Policy())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(100 + rank)
    outputs, advantages = torch.randn(6, 8), torch.randn(6)
    model_unwrapped = model.module if isinstance(model, DistributedDataParallel) else model
    for step in range(2):
        res = model_unwrapped(outputs)  # ROOT
        logp = torch.log_softmax(res, -1)[:, 0]
        loss = -(logp * advantages).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    results[rank] = model.module.lm_head.weight.detach().clone()
    dist.destroy_process_group()


if __name__ == '__main__':
    results = mp.Manager().dict()
    mp.spawn(train_grpo, args=(2, results), nprocs=2, join=True)
    print('replicas equal:', torch.equal(results[0], results[1]))
