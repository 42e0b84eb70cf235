"""Shapes that fired wrongly on the gate corpora as rebuilt in session 10 (packages that had not
downloaded in session 9: botorch's candidate generation), each in another spelling than the
project's and next to a buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # a closure that writes `.grad` itself (gradients from torch.autograd.grad taken before the
    # step) hands the optimizer what backward() would: nothing is missing (GT707; botorch's
    # gen_candidates_torch). The twin returns the same loss and writes no gradient.
    "closure-assigning-grad": (Shape("""
        w = torch.zeros(3, requires_grad=True)
        target = torch.tensor([1.0, -2.0, 0.5])
        opt = torch.optim.SGD([w], lr=0.5)
        for _ in range(3):
            err = ((w - target) ** 2).sum()
            dw = torch.autograd.grad(err, [w])[0]
            def supply():
                opt.zero_grad()
                w.grad = dw.clone()
                return err
            opt.step(supply)
        """, "GT707", holds="bool((w - target).abs().sum() < 3.5)"), Shape("""
        w = torch.zeros(3, requires_grad=True)
        target = torch.tensor([1.0, -2.0, 0.5])
        opt = torch.optim.SGD([w], lr=0.5)
        for _ in range(3):
            err = ((w - target) ** 2).sum()
            def supply():
                opt.zero_grad()
                return err
            opt.step(supply)
        """, "GT707", 8, holds="bool((w == 0).all())")),
    # two `def` of one name at the top of a file: a call made once the module has run finds the
    # last one (GT202 reads the helper a call resolves to the same way Python does)
    "redefined-helper": (Shape("""
        @torch.no_grad()
        def encode(m, x):
            return m(x)
        def encode(m, x):
            return m(x)
        net = nn.Linear(3, 1)
        loss = encode(net, torch.randn(4, 3)).pow(2).mean()
        loss.backward()
        """, "GT202", holds="net.weight.grad is not None"), Shape("""
        def encode(m, x):
            return m(x)
        @torch.no_grad()
        def encode(m, x):
            return m(x)
        net = nn.Linear(3, 1)
        loss = encode(net, torch.randn(4, 3)).pow(2).mean()
        loss.backward()
        """, "GT202", 3, (RuntimeError, "does not require grad"))),
    # a GradScaler built with `enabled=False` scales nothing: clipping before `step` without
    # `unscale_` clips the true gradients (GT524 is about scaled ones). The twin's scaler is
    # enabled by a flag.
    "clip-with-disabled-scaler": (Shape("""
        net = nn.Linear(4, 1)
        before = net.weight.detach().clone()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        grad_scaler = torch.amp.GradScaler("cpu", enabled=False)
        for x, y in [(torch.randn(8, 4), torch.randn(8, 1) * 10)]:
            opt.zero_grad()
            grad_scaler.scale(F.mse_loss(net(x), y)).backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            grad_scaler.step(opt)
            grad_scaler.update()
        """, "GT524", holds="float((net.weight.detach() - before).norm()) > 1e-2"), Shape("""
        use_amp = True
        net = nn.Linear(4, 1)
        before = net.weight.detach().clone()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        grad_scaler = torch.amp.GradScaler("cpu", enabled=use_amp)
        for x, y in [(torch.randn(8, 4), torch.randn(8, 1) * 10)]:
            opt.zero_grad()
            grad_scaler.scale(F.mse_loss(net(x), y)).backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            grad_scaler.step(opt)
            grad_scaler.update()
        """, "GT524", 9, holds="float((net.weight.detach() - before).norm()) < 1e-4")),
}


@pytest.mark.parametrize("which", ["look-alike", "twin"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape(name: str, which: str) -> None:
    judge(PRELUDE, SHAPES[name][0 if which == "look-alike" else 1])


def test_leading_inplace_layer_behind_an_alias_is_still_read() -> None:
    """GT607's prefilter (the file spells `inplace` or a layer called with a positional
    `True`) also lets through an in-place layer imported under another name."""
    from gradtrace.lint import check_source

    src = """
import torch.nn as nn
from torch.nn import ReLU as Act

class Res(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(Act(True), nn.Linear(4, 4))

    def forward(self, x):
        return x + self.body(x)
"""
    assert [(f.code, f.line) for f in check_source(src, "m.py", select=["GT607"])] == \
        [("GT607", 8)]
    plain = src.replace("Act(True)", "Act()")
    assert check_source(plain, "m.py", select=["GT607"]) == []
