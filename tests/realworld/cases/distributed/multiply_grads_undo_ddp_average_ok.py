"""Trainer multiplies gradients by world_size / sample_size, undoing DDP's average to normalize per sample.

source: https://github.com/facebookresearch/fairseq/issues/494
kind: lookalike
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Trainer:
    def __init__(self, model, distributed_world_size):
        self.model = model
        self.distributed_world_size = distributed_world_size
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def multiply_grads(self, c):
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.data.mul_(c)

    def train_step(self, sample):
        self.optimizer.zero_grad()
        src, tgt = sample
        loss = nn.functional.cross_entropy(self.model(src), tgt, reduction='sum')
        loss.backward()
        sample_size = torch.tensor(float(tgt.numel()))
        dist.all_reduce(sample_size)
        self.multiply_grads(self.distributed_world_size / float(sample_size))
        self.optimizer.step()


def run(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29547'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    trainer = Trainer(DistributedDataParallel(nn.Linear(6, 3)), world_size)
    for _ in range(3):
        trainer.train_step((torch.randn(4, 6), torch.randint(0, 3, (4,))))
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(run, args=(2,), nprocs=2, join=True)
