"""The homework SyncBatchNorm after its fix: the `sync_batch_norm` Function's `backward` takes one gradient per forward output (`grad_output, grad_mean, grad_var`, the last two for the non-differentiable running statistics) and returns six gradients, one per `forward` input, so the training loop's `loss.backward()` runs the synchronised backward.

source: https://github.com/KVDmitrieva/efdl-homeworks/commit/c58abc192d03317287bbc552e11d01c602281f46
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.autograd import Function
from torch.nn.modules.batchnorm import _BatchNorm

torch.set_num_threads(1)


class sync_batch_norm(Function):
    """Batch normalisation whose statistics (and backward reductions) are summed over all processes."""

    @staticmethod
    def forward(ctx, input, running_mean, running_var, eps, momentum, training):
        if not training:
            return (input - running_mean) / torch.sqrt(running_var + eps), running_mean, running_var
        n = input.shape[1]
        stats = torch.cat([torch.tensor([float(input.shape[0])]), input.sum(dim=0), (input ** 2).sum(dim=0)])
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        m = stats[0]
        mean = stats[1:1 + n] / m
        var = stats[1 + n:] / m - mean ** 2
        sqrt_var = torch.sqrt(var + eps)
        new_mean = (1 - momentum) * running_mean + momentum * mean
        new_var = (1 - momentum) * running_var + momentum * m * var / (m - 1)
        ctx.save_for_backward(input - mean, sqrt_var, m)
        ctx.mark_non_differentiable(new_mean, new_var)
        return (input - mean) / sqrt_var, new_mean, new_var

    @staticmethod
    def backward(ctx, grad_output, grad_mean, grad_var):
        z, sqrt_var, m = ctx.saved_tensors
        n = z.shape[1]
        t = 1 / sqrt_var
        sums = torch.cat([grad_output.sum(dim=0), (grad_output * z).sum(dim=0)])
        dist.all_reduce(sums, op=dist.ReduceOp.SUM)
        grad_sum, dot = sums[:n], sums[n:]
        grad_input = (grad_output * m - dot * z * t ** 2 - grad_sum) * t / m
        return grad_input, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, eps, momentum, affine=False, track_running_stats=True)

    def forward(self, input):
        out, running_mean, running_var = sync_batch_norm.apply(
            input, self.running_mean, self.running_var, self.eps, self.momentum, self.training)
        self.running_mean.copy_(running_mean)
        self.running_var.copy_(running_var)
        return out


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), SyncBatchNorm(16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(10 + rank)
    for _ in range(3):
        x = torch.randn(32, 8, generator=g)
        y = x[:, :1] * 2 + 0.1 * torch.randn(32, 1, generator=g)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        optimizer.step()
    if rank == 0:
        print(f"final loss on rank 0: {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
