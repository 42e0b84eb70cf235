"""A fused pre-norm Function with five inputs whose backward returns one trailing None too many.

source: https://github.com/deepseek-ai/TileKernels/pull/10
kind: lookalike
verified: torch 2.13 accepts the extra trailing None: x.grad and fn.grad are computed
"""
import torch


class MHCPreNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fn, norm_eps, fuse_grad_acc, n_splits):
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm_eps)
        ctx.save_for_backward(x, fn, rms)
        ctx.fuse_grad_acc = fuse_grad_acc
        return (x * rms) @ fn

    @staticmethod
    def backward(ctx, grad_out):
        x, fn, rms = ctx.saved_tensors
        normed = x * rms
        fn_grad = normed.transpose(-1, -2) @ grad_out
        g = grad_out @ fn.transpose(-1, -2)
        x_grad = rms * (g - normed * (g * normed).mean(-1, keepdim=True))
        if ctx.fuse_grad_acc:
            return None, fn_grad, None, None, None, None
        return x_grad, fn_grad, None, None, None, None


x = torch.randn(4, 8, requires_grad=True)
fn = torch.randn(8, 3, requires_grad=True)
out = MHCPreNormFn.apply(x, fn, 1e-6, False, 1)
out.sum().backward()
print(x.grad.shape, fn.grad.shape)
