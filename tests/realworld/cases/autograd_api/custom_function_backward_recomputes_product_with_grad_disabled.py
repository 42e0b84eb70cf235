"""Custom Function recomputes its output inside backward to call autograd.grad: grad mode is off there.

source: https://github.com/pytorch/pytorch/issues/45405
kind: bug
symptom: silent
verified: dfdx and dfdw are None, so data.grad stays None after loss.backward()
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
        out = torch.sum(x0 * w)  # ROOT
        out.requires_grad = True
        x0.requires_grad = True
        w.requires_grad = True
        dfdx = torch.autograd.grad(outputs=out, inputs=x0, grad_outputs=grad_output,
                                   allow_unused=True, retain_graph=True)
        dfdw = torch.autograd.grad(outputs=out, inputs=w, grad_outputs=grad_output,
                                   allow_unused=True)
        return dfdx[0], dfdw[0]


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
