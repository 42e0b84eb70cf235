"""WongKinYiu/ScaledYOLOv4's `Model._initialize_biases` after the maintainer's fix: the objectness and class priors are added through `.data` of the bias view, so the leaf bias is seeded without autograd recording an in-place op, the model builds, and its re-wrapped biases train.

source: https://github.com/WongKinYiu/ScaledYOLOv4/issues/191
kind: lookalike
"""
import math

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Detect(nn.Module):
    def __init__(self, nc=3, anchors=(), ch=()):
        super().__init__()
        self.nc, self.no = nc, nc + 5
        self.nl, self.na = len(anchors), len(anchors[0]) // 2
        self.register_buffer("anchors", torch.tensor(anchors).float().view(self.nl, -1, 2))
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)
        self.stride = None

    def forward(self, x):
        out = []
        for i in range(self.nl):
            bs, _, ny, nx = x[i].shape
            out.append(self.m[i](x[i]).view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2))
        return out


class Model(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.backbone = nn.ModuleList([nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU()),
                                       nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.SiLU()),
                                       nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.SiLU())])
        self.model = nn.ModuleList([*self.backbone, Detect(nc, ((10, 13, 16, 30), (30, 61, 62, 45)),
                                                           (16, 16))])
        self.model[-1].stride = torch.tensor([4.0, 8.0])
        self._initialize_biases()

    def forward(self, img):
        p2 = self.model[0](img)
        p3 = self.model[1](p2)
        return self.model[-1]([p3, self.model[2](p3)])

    def _initialize_biases(self, cf=None):
        m = self.model[-1]
        for mi, s in zip(m.m, m.stride):
            b = mi.bias.view(m.na, -1)
            b[:, 4].data += math.log(8 / (640 / s) ** 2)
            b[:, 5:].data += math.log(0.6 / (m.nc - 0.99)) if cf is None else torch.log(cf / cf.sum())
            mi.bias = nn.Parameter(b.view(-1), requires_grad=True)


def main():
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    img = torch.rand(2, 3, 32, 32)
    for step in range(2):
        preds = model(img)
        loss = sum(nn.functional.binary_cross_entropy_with_logits(p[..., 4], torch.zeros_like(p[..., 4]))
                   for p in preds)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} objectness loss {loss.item():.4f}")
    print("objectness bias of level 0:", [round(v, 3) for v in model.model[-1].m[0].bias.view(2, -1)[:, 4].tolist()])


if __name__ == "__main__":
    main()
