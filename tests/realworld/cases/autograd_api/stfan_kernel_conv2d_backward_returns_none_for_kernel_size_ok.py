"""STFAN's KernelConv2DFunction as fixed after the issue: backward returns `grad_input, grad_kernel, None`, one entry per forward input (None for kernel_size).

source: https://github.com/sczhou/STFAN/issues/8
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class KernelConv2DFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, kernel, kernel_size):
        ctx.kernel_size = kernel_size
        ctx.save_for_backward(input, kernel)
        b, c, h, w = input.shape
        cols = F.unfold(input, kernel_size, padding=kernel_size // 2).view(b, c, kernel_size ** 2, h, w)
        return (cols * kernel.view(b, c, kernel_size ** 2, h, w)).sum(2)

    @staticmethod
    def backward(ctx, grad_output):
        input, kernel = ctx.saved_tensors
        k = ctx.kernel_size
        b, c, h, w = input.shape
        cols = F.unfold(input, k, padding=k // 2).view(b, c, k * k, h, w)
        grad_kernel = (cols * grad_output.unsqueeze(2)).view(b, c * k * k, h, w)
        grad_cols = (kernel.view(b, c, k * k, h, w) * grad_output.unsqueeze(2)).view(b, c * k * k, h * w)
        grad_input = F.fold(grad_cols, (h, w), k, padding=k // 2)
        return grad_input, grad_kernel, None


class KernelConv2D(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, input, kernel):
        return KernelConv2DFunction.apply(input, kernel, self.kernel_size)


torch.manual_seed(0)
kernel_size = 3
feat_extract = nn.Conv2d(3, 8, 3, padding=1)
kconv_predict = nn.Conv2d(3, 8 * kernel_size ** 2, 3, padding=1)
kconv = KernelConv2D(kernel_size)
img_blur = torch.randn(2, 3, 16, 16)
img_prev = torch.randn(2, 3, 16, 16)
out = kconv(feat_extract(img_blur), kconv_predict(img_prev))
loss = out.pow(2).mean()
loss.backward()
assert feat_extract.weight.grad is not None and kconv_predict.weight.grad is not None
