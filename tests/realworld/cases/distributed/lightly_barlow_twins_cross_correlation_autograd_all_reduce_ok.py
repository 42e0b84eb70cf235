"""lightly's BarlowTwinsLoss with gather_distributed=True after PR 1980 averages the cross-correlation matrix over ranks with the autograd-aware torch.distributed.nn.all_reduce, whose backward all-reduces the gradient, so under DDP the backbone gradient matches Barlow Twins on the global batch.

source: https://github.com/lightly-ai/lightly/pull/1980
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import nn as dist_nn
from torch.nn.parallel import DistributedDataParallel as DDP


class BarlowTwinsLoss(torch.nn.Module):
    def __init__(self, lambda_param=5e-3, gather_distributed=False):
        super(BarlowTwinsLoss, self).__init__()
        self.lambda_param = lambda_param
        self.gather_distributed = gather_distributed

    def forward(self, z_a, z_b):
        z_a_norm, z_b_norm = _normalize(z_a), _normalize(z_b)
        N = z_a.size(0)
        c = z_a_norm.T @ z_b_norm
        c.div_(N)
        if self.gather_distributed and dist.is_initialized():
            world_size = dist.get_world_size()
            if world_size > 1:
                c = dist_nn.all_reduce(c / world_size)
        invariance_loss = torch.diagonal(c).add_(-1).pow_(2).sum()
        redundancy_reduction_loss = _off_diagonal(c).pow_(2).sum()
        return invariance_loss + self.lambda_param * redundancy_reduction_loss


def _normalize(z):
    return F.batch_norm(z, running_mean=None, running_var=None, weight=None, bias=None, training=True)


def _off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29872'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    projector = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    reference = [p.detach().clone() for p in projector.parameters()]
    x0, x1 = torch.randn(world_size, 16, 12), torch.randn(world_size, 16, 12)  # both views of every rank's batch
    model = DDP(projector)
    criterion = BarlowTwinsLoss(gather_distributed=True)
    loss = criterion(model(x0[rank]), model(x1[rank]))
    loss.backward()
    grad = model.module[0].weight.grad
    if rank == 0:  # Barlow Twins on the global batch: the mean of the ranks' cross-correlations, one process
        single = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
        with torch.no_grad():
            for p, r in zip(single.parameters(), reference):
                p.copy_(r)
        cs = [_normalize(single(x0[r])).T @ _normalize(single(x1[r])) / 16 for r in range(world_size)]
        c = sum(cs) / world_size
        ref_loss = (torch.diagonal(c) - 1).pow(2).sum() + 5e-3 * _off_diagonal(c).pow(2).sum()
        ref_loss.backward()
        ref_grad = single[0].weight.grad
        print('loss', round(loss.item(), 4), 'global-batch loss', round(ref_loss.item(), 4))
        print('first layer grad norm', round(grad.norm().item(), 4), 'global-batch grad norm',
              round(ref_grad.norm().item(), 4), 'ratio', round((grad.norm() / ref_grad.norm()).item(), 4))
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
