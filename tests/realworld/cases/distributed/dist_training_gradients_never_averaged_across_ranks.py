"""Hand-written data-parallel training with torch.distributed: each rank steps on its own gradients.

source: https://github.com/pytorch/examples/issues/483
kind: bug
symptom: silent
verified: after 3 steps the two ranks hold different weights (max abs difference 0.13; 0.0 with average_gradients)
"""
import os
import torch
import torch.distributed as distributed
import torch.multiprocessing as mp
import torch.nn as nn


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.net = nn.Linear(8, 1)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def average_gradients(self):
        world_size = distributed.get_world_size()
        for p in self.net.parameters():
            distributed.all_reduce(p.grad.data, op=distributed.ReduceOp.SUM)
            p.grad.data /= float(world_size)

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.net(x), y)
        loss.backward()
        self.optimizer.step()  # ROOT
        return loss.item()


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29575'
    distributed.init_process_group('gloo', rank=rank, world_size=world_size)
    trainer = Trainer()
    torch.manual_seed(100 + rank)
    for _ in range(3):
        trainer.train_step(torch.randn(16, 8), torch.randn(16, 1))
    w = trainer.net.weight.detach().clone()
    ws = [torch.zeros_like(w) for _ in range(world_size)]
    distributed.all_gather(ws, w)
    if rank == 0:
        print((ws[0] - ws[1]).abs().max().item())
    distributed.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
