"""Diffusion planner under DDP encodes route lanes only when a batch has them; on other batches the route encoder gets no gradient.

source: https://github.com/ZhengYinan-AIR/Diffusion-Planner/issues/65
kind: bug
symptom: crash
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Planner(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.agent_encoder = nn.Linear(6, dim)
        self.route_encoder = nn.Linear(4, dim)
        self.decoder = nn.Linear(dim, 8)

    def forward(self, agents, route_lanes=None):
        h = self.agent_encoder(agents).mean(1)
        if route_lanes is not None:
            h = h + self.route_encoder(route_lanes).mean(1)
        return self.decoder(h)


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29647'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = DDP(Planner())  # ROOT
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    for step in range(3):
        agents = torch.randn(2, 5, 6)
        route_lanes = torch.randn(2, 3, 4) if step == 0 else None
        pred = model(agents, route_lanes)  # SYMPTOM
        loss = ((pred - torch.randn(2, 8)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
