"""A BiFPN-style fast normalised fusion (`Fusefeature`, written to replace a YOLO-style `Concat`) keeps its fusion weights as an `nn.Parameter` and clamps them with an `nn.ReLU()` module before normalising. The ReLU is declared out of place, but the model constructor runs the YOLOv5-style `initialize_weights`, which sets `inplace = True` on every ReLU-type activation module of the model; the fusion's ReLU now runs `relu_` on the leaf parameter itself and the first forward fails. The report notes that `F.relu` works and `nn.ReLU()` does not; the maintainer's answer is to apply the ReLU to `self.weight.clone()`.

source: https://github.com/zylo117/Yet-Another-EfficientDet-Pytorch/issues/503
kind: bug
symptom: crash
verified: a leaf Variable that requires grad is being used in an in-place operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class Conv(nn.Module):
    def __init__(self, c1, c2, k=3, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.LeakyReLU(0.1)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Fusefeature(nn.Module):
    """Fast normalised fusion of two feature maps (replaces concat)."""

    def __init__(self, e=1e-4):
        super().__init__()
        self.e = e
        self.weight = nn.Parameter(torch.ones(2, dtype=torch.float32), requires_grad=True)
        self.weight_relu = nn.ReLU()

    def forward(self, x):
        weight = self.weight_relu(self.weight)
        weight = weight / (torch.sum(weight, dim=0) + self.e)
        return F.silu(weight[0] * x[0] + weight[1] * x[1])


def initialize_weights(model):
    for m in model.modules():
        t = type(m)
        if t is nn.BatchNorm2d:
            m.eps = 1e-3
            m.momentum = 0.03
        elif t in [nn.LeakyReLU, nn.ReLU, nn.ReLU6]:
            m.inplace = True  # ROOT


class Model(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.stem = Conv(3, 16, 3, 2)
        self.down = Conv(16, 16, 3, 2)
        self.lateral = Conv(16, 16, 1, 1)
        self.fuse = Fusefeature()
        self.head = nn.Conv2d(16, nc + 5, 1)
        initialize_weights(self)

    def forward(self, x):
        p3 = self.stem(x)
        p4 = self.down(p3)
        up = F.interpolate(self.lateral(p4), scale_factor=2.0, mode="nearest")
        return self.head(self.fuse([p3, up]))


def train(model, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937)
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        images = torch.randn(4, 3, 32, 32, generator=g)
        targets = torch.rand(4, 8, 16, 16, generator=g)
        loss = F.binary_cross_entropy_with_logits(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}, fusion weights {model.fuse.weight.tolist()}")


train(Model())
