"""A sliding-window attention Function whose backward returns two trailing Nones too many: torch accepts them.

source: https://github.com/XPU-Forces/mojo_opset/pull/263
kind: lookalike
verified: backward runs, q.grad, k.grad and v.grad are set
"""
import torch


class SWAFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, window, scale):
        ctx.save_for_backward(q, k, v)
        ctx.scale = scale
        n = q.shape[0]
        idx = torch.arange(n)
        mask = (idx[None, :] - idx[:, None]).abs() > window
        attn = (q @ k.t() * scale).masked_fill(mask, float("-inf")).softmax(-1)
        ctx.attn = attn
        return attn @ v

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        attn = ctx.attn
        dv = attn.t() @ do
        dattn = do @ v.t()
        ds = attn * (dattn - (dattn * attn).sum(-1, keepdim=True))
        dq = ds @ k * ctx.scale
        dk = ds.t() @ q * ctx.scale
        return dq, dk, dv, None, None, None, None


torch.manual_seed(0)
q, k, v = (torch.randn(6, 4, requires_grad=True) for _ in range(3))
out = SWAFunction.apply(q, k, v, 2, 0.5)
out.sum().backward()
print(q.grad is not None, k.grad is not None, v.grad is not None)
