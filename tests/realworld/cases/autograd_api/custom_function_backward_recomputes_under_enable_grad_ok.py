"""Custom Function recomputes its output inside backward under enable_grad on detached copies.

source: https://github.com/pytorch/pytorch/issues/45405
kind: lookalike
"""
import torch
import torch.nn as nn


class func(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x0, w):
        out = torch.sum(x0 * w)
        ctx.save_for_backward(w, x0)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        w, x0 = ctx.saved_tensors
        with torch.enable_grad():
            x0 = x0.detach().requires_grad_(True)
            w = w.detach().requires_grad_(True)
            out = torch.sum(x0 * w)
            dfdx, dfdw = torch.autograd.grad(outputs=out, inputs=(x0, w),
                                             grad_outputs=grad_output)
        return dfdx, dfdw


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.w = torch.rand(2, 3)

    def forward(self, x):
        return func.apply(x, self.w)


net = Net()
data = torch.rand(2, 3)
data.requires_grad = True
gt = 5
out = net(data)
loss = out - gt
loss.backward()
print(data.grad)
