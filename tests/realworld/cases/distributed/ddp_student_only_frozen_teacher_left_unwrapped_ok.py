"""Distillation under DDP wraps only the student; the frozen teacher, which has no trainable parameter, is used unwrapped.

source: https://github.com/yoshitomo-matsubara/torchdistill/pull/124
kind: lookalike
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29646'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    teacher_model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    for param in teacher_model.parameters():
        param.requires_grad = False
    student_model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 10)))
    optimizer = torch.optim.SGD(student_model.parameters(), lr=0.1)
    kl = nn.KLDivLoss(reduction='batchmean')
    for i in range(3):
        x = torch.randn(8, 16)
        with torch.no_grad():
            teacher_logits = teacher_model(x)
        loss = kl(torch.log_softmax(student_model(x), 1), torch.softmax(teacher_logits, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if rank == 0:
        print(loss.item())
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
