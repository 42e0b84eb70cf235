"""MiniLM distillation under DDP: the loss only uses the self-attention distributions and value relations of the student's last layer, so that layer's feed-forward block and the MLM head never take part in the loss, and DDP (find_unused_parameters left False) stops at the next iteration.

source: https://github.com/jongwooko/Pytorch-MiniLM/issues/3
kind: bug
symptom: crash
verified: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


class Layer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.intermediate = nn.Linear(dim, dim * 2)
        self.output = nn.Linear(dim * 2, dim)

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        attn = torch.softmax(q @ k.transpose(-1, -2) / q.size(-1) ** 0.5, -1)
        h = attn @ v
        out = x + self.output(F.gelu(self.intermediate(h)))
        return out, attn, v


class Student(nn.Module):
    def __init__(self, dim=16, layers=2, vocab=50):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Layer(dim) for _ in range(layers)])
        self.cls = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x, attn, v = layer(x)
        return self.cls(x), attn, v


def minilm_loss(s_attn, s_v, t_attn, t_v):
    attn_loss = F.kl_div(torch.log(s_attn + 1e-9), t_attn, reduction='batchmean')
    s_vr = torch.softmax(s_v @ s_v.transpose(-1, -2) / s_v.size(-1) ** 0.5, -1)
    t_vr = torch.softmax(t_v @ t_v.transpose(-1, -2) / t_v.size(-1) ** 0.5, -1)
    return attn_loss + F.kl_div(torch.log(s_vr + 1e-9), t_vr, reduction='batchmean')


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29617'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    teacher = Student(layers=3).eval()
    student = DistributedDataParallel(Student())  # ROOT
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    for step in range(2):
        ids = torch.randint(0, 50, (4, 8))
        with torch.no_grad():
            _, t_attn, t_v = teacher(ids)
        _, s_attn, s_v = student(ids)
        loss = minilm_loss(s_attn, s_v, t_attn, t_v)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(2,), nprocs=2, join=True)
