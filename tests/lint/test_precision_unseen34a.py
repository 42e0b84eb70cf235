"""Shapes that fired wrongly on the projects of docs/triage/unseen34a.md (session 34: computer
vision research code), each in another spelling than the project's and next to a buggy twin
that is still reported. The snippets run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import copy
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

GAN = """
        class G(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Conv2d(3, 1, 1)
                self.f = nn.Conv2d(3, 3, 1)
            def forward(self, x):
                return torch.tanh(self.a(x)), torch.sigmoid(self.f(x))
        netG, netD = G(), nn.Sequential(nn.Conv2d(3, 1, 1), nn.Flatten(), nn.Linear(16, 1))
        opt_g = torch.optim.Adam(netG.parameters())
        opt_d = torch.optim.Adam(netD.parameters())
        loader = [(torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)) for _ in range(2)]
        for image, bg in loader:
            alpha, fg = netG(image)
            shifted = shift_compose(alpha, fg, bg)
            loss_g = -netD(shifted).mean()
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
            fake, real = netD(shifted), netD(image)
            loss_d = (F.softplus(fake).mean() + F.softplus(-real).mean()) * 0.5
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
"""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Background-Matting (functions.py `compose_image_withshift`): the composite is written
    # row by row into a new `torch.zeros` tensor and returned as `Variable(image_sh)`, which
    # drops the history: the discriminator step does not reach the generator's graph. Twin:
    # the helper returns the tensor itself: the second backward runs through the freed graph
    "generator-output-written-into-a-new-tensor-then-wrapped": (Shape("""
        def shift_compose(alpha, fg, bg):
            out = torch.zeros(fg.shape)
            for t in range(fg.shape[0]):
                a = (alpha[t] + 1) / 2
                out[t, ...] = fg[t] * a + (1 - a) * bg[t]
            return Variable(out)
        """ + GAN, "GT508", holds="shifted.grad_fn is None"), Shape("""
        def shift_compose(alpha, fg, bg):
            out = torch.zeros(fg.shape)
            for t in range(fg.shape[0]):
                a = (alpha[t] + 1) / 2
                out[t, ...] = fg[t] * a + (1 - a) * bg[t]
            return out
        """ + GAN, "GT508", line=26, raises=(RuntimeError, "second time"))),
    # CaDDN (pcdet/ops/pointnet2/pointnet2_stack/pointnet2_utils.py, `BallQuery`): the
    # Function returns an int index tensor, written in place through a mask, and the mask
    # (a comparison: bool); no output requires grad, so the short `backward` never runs. Twin:
    # the Function also returns a float distance the loss reads: 'incorrect number of gradients'
    "ball-query-returns-an-index-and-its-comparison-mask": (Shape("""
        class Query(torch.autograd.Function):
            @staticmethod
            def forward(ctx, radius, xyz, centers):
                idx = torch.zeros(centers.shape[0], 2, dtype=torch.int32)
                missing = (idx[:, 0] == -1)
                idx[missing] = 0
                return idx, missing
            @staticmethod
            def backward(ctx, a=None, b=None):
                return None, None
        xyz = torch.randn(5, 3, requires_grad=True)
        idx, missing = Query.apply(0.2, xyz, xyz * 2)
        loss = (xyz[idx[:, 0].long()] ** 2).sum()
        loss.backward()
        """, "GT701", holds="xyz.grad is not None"), Shape("""
        class Query(torch.autograd.Function):
            @staticmethod
            def forward(ctx, radius, xyz, centers):
                idx = torch.zeros(centers.shape[0], 2, dtype=torch.int32)
                missing = (idx[:, 0] == -1)
                idx[missing] = 0
                return idx, missing, centers.norm(dim=1)
            @staticmethod
            def backward(ctx, a=None, b=None, c=None):
                return None, None
        xyz = torch.randn(5, 3, requires_grad=True)
        idx, missing, dist = Query.apply(0.2, xyz, xyz * 2)
        dist.sum().backward()
        """, "GT701", line=10, raises=(RuntimeError, "incorrect number of gradients"))),
    # PytorchOCR (torchocr/losses/distillation_loss.py): `blank_mask = torch.ones_like(out)`
    # then the misspelled `blank_mask.requires_grade = False`: a factory's new tensor does not
    # require grad, so the freeze it meant holds already. Twin: the mask made with
    # `requires_grad=True`: the misspelled False leaves it requiring grad
    "misspelled-freeze-of-a-new-factory-tensor": (Shape("""
        def masked(student):
            blank_mask = torch.ones_like(student)
            blank_mask.requires_grade = False
            blank_mask[:, 0] = -1
            return student * blank_mask, blank_mask
        out, mask = masked(torch.randn(2, 3, requires_grad=True))
        """, "GT430", holds="not mask.requires_grad"), Shape("""
        def masked(student):
            blank_mask = torch.ones_like(student, requires_grad=True)
            blank_mask.requires_grade = False
            return student * blank_mask, blank_mask
        out, mask = masked(torch.randn(2, 3, requires_grad=True))
        """, "GT430", line=3, holds="mask.requires_grad")),
    # dsmil-wsi (simclr/models/resnet_simclr.py): a dict of candidate backbones, the chosen
    # one bound to a local by a method and registered through `nn.Sequential(*list(
    # resnet.children())[:-1])`. Twin: forward runs the dict's entry: its parameters are
    # not the module's
    "picked-backbone-registered-through-its-children": (Shape("""
        class Encoder(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.choices = {"small": nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
                                "big": nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))}
                net = self._pick(name)
                self.features = nn.Sequential(*list(net.children())[:-1])
                self.head = nn.Linear(8, 3)
            def _pick(self, name):
                return self.choices[name]
            def forward(self, x):
                return self.head(self.features(x))
        enc = Encoder("small")
        """, "GT401", holds="len(list(enc.parameters())) == 4"), Shape("""
        class Encoder(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.choices = {"small": nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
                                "big": nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))}
                self.name = name
                net = self._pick(name)
                self.head = nn.Linear(net[-1].out_features, 3)
            def _pick(self, name):
                return self.choices[name]
            def forward(self, x):
                return self.head(self.choices[self.name](x))
        enc = Encoder("small")
        """, "GT401", line=4, holds="len(list(enc.parameters())) == 2")),
    # PETR (projects/mmdet3d_plugin/models/dense_heads/detr3d_head.py): `_get_clones`, a
    # deep-copying helper defined inside `__init__`, builds the heads with box refinement; the
    # other arm shares one head across decoder layers on purpose (DETR). Twin: the nested
    # "clone" helper repeats the module it is given: refinement gets one head, not n
    "shared-heads-beside-a-nested-clone-helper": (Shape("""
        class Head(nn.Module):
            def __init__(self, n, refine):
                super().__init__()
                fc = nn.Linear(4, 2)
                def _get_clones(module, k):
                    return nn.ModuleList([copy.deepcopy(module) for _ in range(k)])
                if refine:
                    self.cls = _get_clones(fc, n)
                else:
                    self.cls = nn.ModuleList([fc for _ in range(n)])
        h = Head(3, True)
        """, "GT446", holds="h.cls[0] is not h.cls[1]"), Shape("""
        class Head(nn.Module):
            def __init__(self, n, refine):
                super().__init__()
                fc = nn.Linear(4, 2)
                def _get_clones(module, k):
                    return nn.ModuleList([module for _ in range(k)])
                if refine:
                    self.cls = _get_clones(fc, n)
                else:
                    self.cls = nn.ModuleList([fc for _ in range(n)])
        h = Head(3, True)
        """, "GT446", line=6, holds="h.cls[0] is h.cls[2]")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
