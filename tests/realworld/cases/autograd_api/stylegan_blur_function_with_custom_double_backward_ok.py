"""style-based-gan-pytorch Blur: BlurFunction's backward calls BlurFunctionBackward.apply, another autograd.Function with its own backward, so the R1 gradient penalty (create_graph=True) differentiates through the blur twice correctly.

source: https://github.com/rosinality/style-based-gan-pytorch/issues/89
kind: lookalike
verified: the discriminator gradients from the R1 penalty equal those of the same network with a plain F.conv2d blur
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function, grad


class BlurFunctionBackward(Function):
    @staticmethod
    def forward(ctx, grad_output, kernel, kernel_flip):
        ctx.save_for_backward(kernel, kernel_flip)
        grad_input = F.conv2d(grad_output, kernel_flip, padding=1, groups=grad_output.shape[1])
        return grad_input

    @staticmethod
    def backward(ctx, gradgrad_output):
        kernel, kernel_flip = ctx.saved_tensors
        grad_input = F.conv2d(gradgrad_output, kernel, padding=1, groups=gradgrad_output.shape[1])
        return grad_input, None, None


class BlurFunction(Function):
    @staticmethod
    def forward(ctx, input, kernel, kernel_flip):
        ctx.save_for_backward(kernel, kernel_flip)
        output = F.conv2d(input, kernel, padding=1, groups=input.shape[1])
        return output

    @staticmethod
    def backward(ctx, grad_output):
        kernel, kernel_flip = ctx.saved_tensors
        grad_input = BlurFunctionBackward.apply(grad_output, kernel, kernel_flip)
        return grad_input, None, None


blur = BlurFunction.apply


class Blur(nn.Module):
    def __init__(self, channel, custom=True):
        super().__init__()
        weight = torch.tensor([[1, 2, 1], [2, 4, 2], [1, 2, 1]], dtype=torch.float32)
        weight = weight.view(1, 1, 3, 3)
        weight = weight / weight.sum()
        weight_flip = torch.flip(weight, [2, 3])
        self.register_buffer('weight', weight.repeat(channel, 1, 1, 1))
        self.register_buffer('weight_flip', weight_flip.repeat(channel, 1, 1, 1))
        self.custom = custom

    def forward(self, input):
        if self.custom:
            return blur(input, self.weight, self.weight_flip)
        return F.conv2d(input, self.weight, padding=1, groups=input.shape[1])


def r1_grads(custom):
    torch.manual_seed(0)
    discriminator = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Softplus(), Blur(4, custom),
                                  nn.Conv2d(4, 4, 3, stride=2, padding=1), nn.Softplus(), nn.Flatten(),
                                  nn.Linear(4 * 4 * 4, 1))
    real_image = torch.randn(2, 3, 8, 8)
    real_image.requires_grad = True
    real_scores = discriminator(real_image)
    grad_real = grad(outputs=real_scores.sum(), inputs=real_image, create_graph=True)[0]
    grad_penalty = (grad_real.view(grad_real.size(0), -1).norm(2, dim=1) ** 2).mean()
    grad_penalty = 10 / 2 * grad_penalty
    grad_penalty.backward()
    return [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in discriminator.parameters()]


print(all(torch.allclose(a, b, atol=1e-6) for a, b in zip(r1_grads(True), r1_grads(False))))
