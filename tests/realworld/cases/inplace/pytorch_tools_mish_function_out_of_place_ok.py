"""pytorch-tools after "make swish & mish not inplace again": the scripted Mish forward computes `x.mul(torch.tanh(F.softplus(x)))` out of place, so the input saved by the custom Function's forward is still x when the backward evaluates the derivative; the hand-written backward matches the naive Mish's gradient.

source: https://github.com/bonlime/pytorch-tools/commit/655d6ea1bd975f83ffd0d9e38c88e69d23bddee6
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


@torch.jit.script
def mish_jit_fwd(x):
    return x.mul(torch.tanh(F.softplus(x)))


@torch.jit.script
def mish_jit_bwd(x, grad_output):
    x_sigmoid = torch.sigmoid(x)
    x_tanh_sp = F.softplus(x).tanh()
    return grad_output.mul(x_tanh_sp + x * x_sigmoid * (1 - x_tanh_sp * x_tanh_sp))


class MishFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return mish_jit_fwd(x)

    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.saved_tensors[0]
        return mish_jit_bwd(x, grad_output)


def mish_naive(x, inplace=False):
    return x.mul(F.softplus(x).tanh())


class Mish(nn.Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return MishFunction.apply(x)


ACTIVATIONS = {"mish": Mish, "relu": nn.ReLU}


def activation_from_name(name, inplace=True):
    return ACTIVATIONS[name](inplace=inplace)


class ConvBnAct(nn.Sequential):
    def __init__(self, cin, cout, activation="mish"):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         activation_from_name(activation))


class TinyNet(nn.Module):
    def __init__(self, activation="mish"):
        super().__init__()
        self.stem = ConvBnAct(3, 8, activation)
        self.block = ConvBnAct(8, 8, activation)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.block(self.stem(x)).mean((2, 3)))


def reference_grad(model, x, y):
    """The same forward written with the naive (out-of-place) Mish, for the measurement."""
    h = x
    for m in (model.stem, model.block):
        h = mish_naive(m[1](m[0](h)))
    loss = F.cross_entropy(model.head(h.mean((2, 3))), y)
    return torch.autograd.grad(loss, model.stem[0].weight)[0]


model = TinyNet(activation="mish")
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(5):
    x, y = torch.randn(8, 3, 12, 12), torch.randint(0, 4, (8,))
    ref = reference_grad(model, x, y)
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    err = ((model.stem[0].weight.grad - ref).norm() / ref.norm()).item()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}, stem grad relative error {err:.3f}")
