"""OpenTSLM's curriculum trainer wraps the model in DistributedDataParallel but _train_stage computes the loss with self._get_model().compute_loss(batch), and _get_model() unwraps DDP: the forward never arms DDP's reducer, backward all-reduces nothing and each rank steps on its own gradients, so the replicas silently diverge.

source: https://github.com/OpenTSLM/OpenTSLM/pull/49
kind: bug
symptom: silent
verified: with 2 gloo ranks on different batches, after 10 AdamW steps (lr 1e-2) encoder.weight differs between rank 0 and rank 1 by 0.148 (max abs); running the forward through the DDP wrapper (the fixed form) keeps the ranks identical (difference 0.0)
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class OpenTSLMSP(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(F.gelu(self.encoder(x)))

    def compute_loss(self, batch):
        return F.cross_entropy(self(batch['x']), batch['y'])


class CurriculumTrainer:
    def __init__(self, rank):
        torch.manual_seed(0)
        self.model = DDP(OpenTSLMSP())
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.rank = rank

    def _get_model(self):
        return self.model.module if isinstance(self.model, DDP) else self.model

    def _train_stage(self, steps=10):
        gen = torch.Generator().manual_seed(100 + self.rank)
        for _ in range(steps):
            batch = {'x': torch.randn(8, 16, generator=gen), 'y': torch.randint(0, 4, (8,), generator=gen)}
            self.optimizer.zero_grad()
            loss = self._get_model().compute_loss(batch)  # ROOT
            loss.backward()
            self.optimizer.step()
        return self._get_model().encoder.weight.detach().clone()


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29747'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    trainer = CurriculumTrainer(rank)
    w = trainer._train_stage()
    ws = [torch.zeros_like(w) for _ in range(world_size)]
    dist.all_gather(ws, w)
    if rank == 0:
        print('encoder.weight rank difference', (ws[0] - ws[1]).abs().max().item())
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
