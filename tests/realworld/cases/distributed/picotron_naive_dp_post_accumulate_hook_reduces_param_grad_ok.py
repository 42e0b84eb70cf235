"""picotron's naive data parallelism with the hook written as the issue proposes: `register_post_accumulate_grad_hook` hands the hook the parameter, so the hook all-reduces and averages `param.grad`, the gradients of every rank are synchronised before the optimizer step, and the replicas stay identical.

source: https://github.com/huggingface/picotron/issues/39
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import contextlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class DataParallelNaive(nn.Module):
    """Naive data parallelism: all-reduce every gradient once it is accumulated."""

    def __init__(self, module):
        super().__init__()
        self.module = module
        self.require_backward_grad_sync = True
        for p in self.module.parameters():
            if p.requires_grad is True:
                p.register_post_accumulate_grad_hook(self._allreduce_grads)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    def _allreduce_grads(self, param):
        # No synchronization needed during gradient accumulation, except at the final step.
        if self.require_backward_grad_sync:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= dist.get_world_size()

    @contextlib.contextmanager
    def no_sync(self):
        self.require_backward_grad_sync = False
        yield
        self.require_backward_grad_sync = True


def main():
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same initial weights on every rank
    model = DataParallelNaive(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    torch.manual_seed(100 + rank)  # each rank sees its own shard of the data
    for step in range(3):
        x, y = torch.randn(16, 8), torch.randn(16, 1)
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

    weight = model.module[0].weight.detach().clone()
    gathered = [torch.empty_like(weight) for _ in range(world)]
    dist.all_gather(gathered, weight)
    if rank == 0:
        drift = max((w - gathered[0]).abs().max().item() for w in gathered)
        print(f"max weight difference between replicas: {drift:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
