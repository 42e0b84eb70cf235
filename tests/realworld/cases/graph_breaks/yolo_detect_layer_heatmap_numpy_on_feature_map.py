"""YOLO detect-layer visualization: the head's feature maps come from a forward run with autograd on, and plot_multi_heatmap converts each with array.cpu().numpy(), which refuses a tensor that requires grad.

source: https://github.com/XiaMooo/Yolo-Detect-Layer-Visualization/issues/1
kind: bug
symptom: crash
verified: Can't call numpy() on Tensor that requires grad
"""
import numpy as np
import torch
import torch.nn as nn


class Detect(nn.Module):
    def __init__(self, nc=3, ch=(8, 16)):
        super().__init__()
        self.no = nc + 5
        self.m = nn.ModuleList(nn.Conv2d(c, self.no, 1) for c in ch)

    def forward(self, xs):
        return [m(x) for m, x in zip(self.m, xs)]


def plot_multi_heatmap(*arrays, row=None, col=None):
    col = col or len(arrays)
    row = row or 1
    grid = []
    for i, array in enumerate(arrays):
        if isinstance(array, torch.Tensor):
            array = array.cpu().numpy()  # ROOT
        array = (array - array.min()) / (np.ptp(array) + 1e-9)
        grid.append((i // col, i % col, array))
    return grid


torch.manual_seed(0)
backbone = nn.ModuleList([nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.Conv2d(8, 16, 3, stride=2, padding=1)])
detect = Detect()
img = torch.rand(1, 3, 32, 32)
p3 = backbone[0](img)
p4 = backbone[1](p3)
outs = detect([p3, p4])
heads = [o[0, 4] for o in outs]
grid = plot_multi_heatmap(*heads, row=1, col=2)
print(len(grid))
