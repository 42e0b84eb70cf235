"""lightly's GatherLayer after PR 1531 all-reduces the gradients of every gathered slice in its backward before taking this rank's slice, so each rank's embeddings get the gradients of every rank's loss (they are the other ranks' negatives too) and the DDP-averaged backbone gradient matches SimCLR on the global batch.

source: https://github.com/lightly-ai/lightly/pull/1531
kind: lookalike
"""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class GatherLayer(torch.autograd.Function):
    """Gather tensors from all processes, supporting backward propagation."""

    @staticmethod
    def forward(ctx, input):
        output = [torch.empty_like(input) for _ in range(dist.get_world_size())]
        dist.all_gather(output, input)
        return tuple(output)

    @staticmethod
    def backward(ctx, *grads):
        all_gradients = torch.stack(grads)
        dist.all_reduce(all_gradients)
        grad_out = all_gradients[dist.get_rank()]
        return grad_out


def eye_rank(n, rank, world_size):
    diag_mask = torch.zeros((n, n * world_size), dtype=torch.bool)
    diag_mask[(torch.arange(n), torch.arange(n) + rank * n)] = True
    return diag_mask


def ntxent(out0, out1, temperature=0.5, gathered=None, rank=0, world_size=1):
    # NTXentLoss.forward without a memory bank; `gathered` is the all-gather (GatherLayer or, in the reference, a concat)
    batch_size = out0.shape[0]
    out0 = nn.functional.normalize(out0, dim=1)
    out1 = nn.functional.normalize(out1, dim=1)
    out0_large, out1_large = gathered(out0), gathered(out1)
    diag_mask = eye_rank(batch_size, rank, world_size)
    logits_00 = torch.einsum("nc,mc->nm", out0, out0_large) / temperature
    logits_01 = torch.einsum("nc,mc->nm", out0, out1_large) / temperature
    logits_10 = torch.einsum("nc,mc->nm", out1, out0_large) / temperature
    logits_11 = torch.einsum("nc,mc->nm", out1, out1_large) / temperature
    logits_00 = logits_00[~diag_mask].view(batch_size, -1)
    logits_11 = logits_11[~diag_mask].view(batch_size, -1)
    logits_0100 = torch.cat([logits_01, logits_00], dim=1)
    logits_1011 = torch.cat([logits_10, logits_11], dim=1)
    logits = torch.cat([logits_0100, logits_1011], dim=0)
    labels = torch.arange(batch_size, dtype=torch.long) + rank * batch_size
    return nn.functional.cross_entropy(logits, labels.repeat(2))


def make_projector():
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8))


def main(rank, world_size, port):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = str(port)
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    projector = make_projector()
    reference = [p.detach().clone() for p in projector.parameters()]
    x0, x1 = torch.randn(world_size, 8, 12), torch.randn(world_size, 8, 12)  # both views of every rank's batch
    model = DDP(projector)
    gather = lambda t: torch.cat(GatherLayer.apply(t), 0)
    loss = ntxent(model(x0[rank]), model(x1[rank]), gathered=gather, rank=rank, world_size=world_size)
    loss.backward()
    grad = model.module[0].weight.grad
    if rank == 0:  # the mean of the ranks' losses with every rank's embeddings in one graph, one process
        single = make_projector()
        with torch.no_grad():
            for p, r in zip(single.parameters(), reference):
                p.copy_(r)
        z0, z1 = [single(x0[r]) for r in range(world_size)], [single(x1[r]) for r in range(world_size)]
        losses = []
        for r in range(world_size):
            # each rank's "all_gather" is the concatenation of every rank's (normalised) embeddings
            norm0 = [nn.functional.normalize(z, dim=1) for z in z0]
            norm1 = [nn.functional.normalize(z, dim=1) for z in z1]
            big = {0: torch.cat(norm0, 0), 1: torch.cat(norm1, 0)}
            calls = iter([big[0], big[1]])
            losses.append(ntxent(z0[r], z1[r], gathered=lambda t: next(calls), rank=r, world_size=world_size))
        ref_loss = sum(losses) / world_size
        ref_loss.backward()
        ref_grad = single[0].weight.grad
        print('loss on rank 0', round(loss.item(), 4), 'mean of the ranks\' losses', round(ref_loss.item(), 4))
        print('first layer grad norm', round(grad.norm().item(), 4), 'global-batch grad norm', round(ref_grad.norm().item(), 4),
              'relative difference', round(((grad - ref_grad).norm() / ref_grad.norm()).item(), 4))
    dist.destroy_process_group()


if __name__ == '__main__':
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free_port = sock.getsockname()[1]
    mp.spawn(main, args=(2, free_port), nprocs=2, join=True)
