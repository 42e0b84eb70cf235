"""padertorch after commit f843ba4: the hand-written backward of `Normalize` subtracts the mean from `x_hat` under `ctx.shift`, as the forward does, so a Norm with `shift=False, scale=True` gets the gamma gradient of the forward it ran.

source: https://github.com/fgnt/padertorch/commit/f843ba4ea9359ffaa1caacafb6c3441bc72c1b95
kind: lookalike
"""
import torch
from torch import nn
from torch.autograd import Function

torch.manual_seed(0)


def compute_mask(x, seq_len, batch_axis=0, seq_axis=1):
    if seq_len is None:
        return torch.ones_like(x)
    shape = [1] * x.dim()
    shape[batch_axis], shape[seq_axis] = x.shape[batch_axis], x.shape[seq_axis]
    positions = torch.arange(x.shape[seq_axis]).view(*[1 if i != seq_axis % x.dim() else -1 for i in range(x.dim())])
    lengths = torch.tensor(seq_len).view(*[1 if i != batch_axis else -1 for i in range(x.dim())])
    return (positions < lengths).float().expand(*shape).expand_as(x)


class Normalize(Function):
    @staticmethod
    def forward(ctx, x, gamma, beta, statistics_axis, batch_axis, sequence_axis, seq_len, shift, scale, eps):
        ctx.statistics_axis = statistics_axis
        ctx.batch_axis = batch_axis
        ctx.sequence_axis = sequence_axis
        ctx.seq_len = seq_len
        ctx.shift = shift
        ctx.scale = scale
        ctx.eps = eps
        mask = compute_mask(x, seq_len, batch_axis, sequence_axis)
        n_values = mask.sum(dim=statistics_axis, keepdim=True)
        x = x * mask
        mean = x.sum(dim=statistics_axis, keepdim=True) / torch.max(n_values, torch.ones_like(n_values))
        power = (x ** 2).sum(dim=statistics_axis, keepdim=True) / torch.max(n_values, torch.ones_like(n_values))
        y = x
        if shift:
            y = y - mean
            power = power - mean ** 2
        if scale:
            y = y / torch.sqrt(power + eps)
        ctx.save_for_backward(x, gamma, beta, mean, power)
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return y * mask, mean, power, n_values

    @staticmethod
    def backward(ctx, grad_y, grad_mean, grad_power, _):
        # equations from https://arxiv.org/abs/1502.03167
        if (grad_mean != 0).any() or (grad_power != 0).any():
            raise NotImplementedError
        x, gamma, beta, mean, power = ctx.saved_tensors
        mask = compute_mask(x, ctx.seq_len, ctx.batch_axis, ctx.sequence_axis)
        n_values = mask.sum(dim=ctx.statistics_axis, keepdim=True)

        grad_y = grad_y * mask
        x_hat = x
        scale = torch.sqrt(power + ctx.eps)
        if ctx.shift:
            x_hat = x_hat - mean
        if ctx.scale:
            x_hat = x_hat / scale
        if beta is None:
            grad_beta = None
        else:
            reduce_axis = [i for i in range(beta.dim()) if beta.shape[i] == 1]
            grad_beta = grad_y.sum(reduce_axis, keepdim=True)
        if gamma is None:
            grad_gamma = None
            grad_x_hat = grad_y
        else:
            reduce_axis = [i for i in range(gamma.dim()) if gamma.shape[i] == 1]
            grad_gamma = (grad_y * x_hat).sum(reduce_axis, keepdim=True)
            grad_x_hat = grad_y * gamma
        if ctx.shift:
            x = (x - mean) * mask
            grad_mean_ = -grad_x_hat.sum(ctx.statistics_axis, keepdim=True)
        if ctx.scale:
            grad_power_ = (grad_x_hat * x).sum(ctx.statistics_axis, keepdim=True) * (-1 / 2) * (power + ctx.eps) ** (-3 / 2)
            if ctx.shift:
                grad_mean_ = grad_mean_ / scale - 2 * grad_power_ * x.sum(ctx.statistics_axis, keepdim=True) / n_values
        grad_x = grad_x_hat
        if ctx.scale:
            grad_x = grad_x / scale + grad_power_ * 2 * x / n_values
        if ctx.shift:
            grad_x = grad_x + grad_mean_ / n_values
        return grad_x * mask, grad_gamma, grad_beta, None, None, None, None, None, None, None


def normalize(x, gamma, beta, statistics_axis, batch_axis, sequence_axis, seq_len, shift, scale, eps):
    return Normalize.apply(x, gamma, beta, statistics_axis, batch_axis, sequence_axis, seq_len, shift, scale, eps)


class Norm(nn.Module):
    """Norm with data_format 'bct', statistics over batch and time, as the layer builds it for Normalize."""

    def __init__(self, num_channels, shift=True, scale=True, eps=1e-3):
        super().__init__()
        self.shift, self.scale, self.eps = shift, scale, eps
        self.gamma = nn.Parameter(torch.ones(1, num_channels, 1)) if scale else None
        self.beta = nn.Parameter(torch.zeros(1, num_channels, 1)) if shift else None

    def forward(self, x, seq_len=None):
        y, mean, power, n_values = normalize(x, gamma=self.gamma, beta=self.beta, statistics_axis=[0, 2],
                                             batch_axis=0, sequence_axis=2, seq_len=seq_len,
                                             shift=self.shift, scale=self.scale, eps=self.eps)
        return y


def reference(x, gamma, seq_len, eps):
    """The same forward (shift=False, scale=True) in plain torch ops, differentiated by autograd."""
    mask = compute_mask(x, seq_len, 0, 2)
    x = x * mask
    power = (x ** 2).sum(dim=[0, 2], keepdim=True) / mask.sum(dim=[0, 2], keepdim=True)
    return x / torch.sqrt(power + eps) * gamma * mask


norm = Norm(8, shift=False, scale=True)
conv = nn.Conv1d(8, 8, 3, padding=1)
optimizer = torch.optim.SGD(list(norm.parameters()) + list(conv.parameters()), lr=0.1)
for step in range(3):
    x = torch.randn(4, 8, 20) + 2.0
    seq_len = [20, 17, 12, 9]
    loss = (conv(norm(x, seq_len)) - 1.0).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

x = (torch.randn(4, 8, 20) + 2.0).requires_grad_()
seq_len = [20, 17, 12, 9]
target = torch.randn(4, 8, 20)
g_custom = torch.autograd.grad(((norm(x, seq_len) - target) ** 2).sum(), [x, norm.gamma])
g_ref = torch.autograd.grad(((reference(x, norm.gamma, seq_len, norm.eps) - target) ** 2).sum(), [x, norm.gamma])
for name, a, b in zip(["input", "gamma"], g_custom, g_ref):
    print(f"{name} gradient: relative error {((a - b).norm() / b.norm()).item():.3g}")
