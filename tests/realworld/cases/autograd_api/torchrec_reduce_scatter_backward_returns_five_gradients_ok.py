"""torchrec::reduce_scatter_tensor with the PR's fix: the registered backward returns the input's gradient and four None, one per forward input.

source: https://github.com/meta-pytorch/torchrec/pull/4363
kind: lookalike
"""
import torch


@torch.library.custom_op("torchrec::reduce_scatter_tensor", mutates_args=())
def reduce_scatter_tensor(input: torch.Tensor, reduceOp: str, group_size: int, group_name: str,
                          gradient_division: bool) -> torch.Tensor:
    # one rank: the reduce-scatter of a single shard is the shard itself
    return input.chunk(group_size)[0].clone()


@reduce_scatter_tensor.register_fake
def _(input, reduceOp, group_size, group_name, gradient_division):
    return input.new_empty((input.shape[0] // group_size, *input.shape[1:]))


def _setup_context(ctx, inputs, output):
    _, _, group_size, _, gradient_division = inputs
    ctx.group_size = group_size
    ctx.gradient_division = gradient_division


def _reduce_scatter_tensor_backward(ctx, grad_output):
    grad_input = torch.cat([grad_output] * ctx.group_size, dim=0)
    if ctx.gradient_division:
        grad_input = grad_input / ctx.group_size
    return grad_input, None, None, None, None


reduce_scatter_tensor.register_autograd(_reduce_scatter_tensor_backward, setup_context=_setup_context)

torch.manual_seed(0)
pooled = torch.nn.EmbeddingBag(16, 8, mode="sum")
optimizer = torch.optim.SGD(pooled.parameters(), lr=0.1)
ids, offsets = torch.randint(0, 16, (12,)), torch.tensor([0, 3, 6, 9])
out = reduce_scatter_tensor(pooled(ids, offsets), "sum", 1, "default_pg", True)
loss = out.pow(2).sum()
loss.backward()
optimizer.step()
