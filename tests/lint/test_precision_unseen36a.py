"""Shapes that fired wrongly on the vision projects of docs/triage/unseen36a.md (session 36),
each in another spelling than the project's and next to a buggy twin that is still reported.
Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import math
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
warnings.simplefilter("ignore", DeprecationWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # BiRefNet (`loss.py`): a plain dict of loss modules, one of them an SSIM loss whose
    # `self.window = create_window(size, channel)` is a tensor a helper of the file returns
    # (a Gaussian kernel): no loss owns a parameter or buffer, registering changes nothing.
    # Twin: the helper returns a convolution: the dict hides its weights from `parameters()`
    "loss-dict-holding-a-kernel-from-a-helper": (Shape("""
        def gauss(size, sigma):
            g = torch.tensor([math.exp(-(i - size // 2) ** 2 / (2 * sigma ** 2))
                              for i in range(size)])
            return g / g.sum()
        def make_kernel(size, channels):
            g = gauss(size, 1.5).unsqueeze(1)
            k = (g @ g.t()).expand(channels, 1, size, size).contiguous()
            return k
        class BlurLoss(nn.Module):
            def __init__(self, size=5):
                super().__init__()
                self.size = size
                self.kernel = make_kernel(size, 1)
            def forward(self, a, b):
                k = self.kernel.to(a.dtype)
                blur = lambda t: F.conv2d(t, k, padding=self.size // 2)
                return (blur(a) - blur(b)).abs().mean()
        class PixelLoss(nn.Module):
            def __init__(self, names):
                super().__init__()
                self.terms = {}
                if "l1" in names:
                    self.terms["l1"] = nn.L1Loss()
                if "blur" in names:
                    self.terms["blur"] = BlurLoss()
            def forward(self, a, b):
                return sum(t(a, b) for t in self.terms.values())
        crit = PixelLoss(["l1", "blur"])
        net = nn.Conv2d(1, 1, 3, padding=1)
        crit(net(torch.rand(2, 1, 8, 8)), torch.rand(2, 1, 8, 8)).backward()
        """, "GT401", holds="net.weight.grad is not None and list(crit.parameters()) == []"),
        Shape("""
        def make_kernel(size, channels):
            k = nn.Conv2d(channels, channels, size, padding=size // 2, bias=False)
            return k
        class BlurLoss(nn.Module):
            def __init__(self, size=5):
                super().__init__()
                self.kernel = make_kernel(size, 1)
            def forward(self, a, b):
                return (self.kernel(a) - self.kernel(b)).abs().mean()
        class PixelLoss(nn.Module):
            def __init__(self, names):
                super().__init__()
                self.terms = {}
                if "blur" in names:
                    self.terms["blur"] = BlurLoss()
            def forward(self, a, b):
                return sum(t(a, b) for t in self.terms.values())
        crit = PixelLoss(["blur"])
        """, "GT401", line=13, holds="list(crit.parameters()) == []")),
    # ST-P3 (`stp3/cost.py`): a planning cost takes the softmax of a drivable-area map,
    # zeroes its low scores in place (`area[area < 0.5] = 0`) and reads it only through
    # `torch.logical_not(area)` / `torch.nonzero(area[i])`: a boolean or indices come out, so
    # backward never runs the softmax and its saved output is never read. Twin: the
    # thresholded map weights the cost: 'modified by an inplace operation'
    "softmax-thresholded-in-place-then-read-as-a-mask": (Shape("""
        class AreaCost(nn.Module):
            def forward(self, cost, area_logits):
                area = torch.softmax(area_logits, dim=1)[:, 1]
                area[area < 0.5] = 0
                outside = torch.logical_not(area).float()
                hits = [torch.nonzero(area[i]).shape[0] for i in range(area.shape[0])]
                return (cost * outside).mean() + 0 * len(hits)
        head = nn.Conv2d(1, 2, 1)
        crit = AreaCost()
        cost = nn.Parameter(torch.rand(2, 4, 4))
        crit(cost, head(torch.randn(2, 1, 4, 4))).backward()
        """, "GT602", holds="cost.grad is not None"), Shape("""
        class AreaCost(nn.Module):
            def forward(self, cost, area_logits):
                area = torch.softmax(area_logits, dim=1)[:, 1]
                area[area < 0.5] = 0
                return (cost * area).mean()
        head = nn.Conv2d(1, 2, 1)
        crit = AreaCost()
        cost = nn.Parameter(torch.rand(2, 4, 4))
        crit(cost, head(torch.randn(2, 1, 4, 4))).backward()
        """, "GT602", line=4, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
