"""Lead, session 39: GT509's proof (NOTE [proven shared graph]) counts ``model.<layer>(x)`` on
a training function's plain argument when a module class of the file registers ``<layer>``:
two backward passes through ``model.backbone``'s output are reported (and raise); the same
calls on an object whose class is not in the file stay silent (its layers are out of sight)."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

TRAIN = """
import torch
import torch.nn as nn
{CLASS}

def fit(net, batches, opt):
    for x, y, b in batches:
        opt.zero_grad()
        feats = net.trunk(x)
        cls_loss = nn.functional.cross_entropy(net.cls(feats), y)
        box_loss = nn.functional.mse_loss(net.box(feats), b)
        cls_loss.backward()  # <- here
        box_loss.backward()
        opt.step()
{RUN}
"""
CLASS = """
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 8)
        self.cls = nn.Linear(8, 3)
        self.box = nn.Linear(8, 2)
"""
RUN = """
net = TwoHeads()
fit(net, [(torch.randn(5, 4), torch.randint(0, 3, (5,)), torch.randn(5, 2))],
    torch.optim.SGD(net.parameters(), lr=0.1))
"""


def _found(tmp_path: Path, src: str) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    p = tmp_path / "fit.py"
    p.write_text(textwrap.dedent(src).lstrip("\n"))
    return [(f.code, f.line) for f in check_paths([str(p)], Settings()).findings
            if f.code == "GT509"]


def test_layers_of_a_file_class_on_an_argument_are_reported(tmp_path: Path) -> None:
    src = TRAIN.replace("{CLASS}", CLASS).replace("{RUN}", RUN)
    line = next(i for i, ln in enumerate(textwrap.dedent(src).lstrip("\n").splitlines(), 1)
                if "# <- here" in ln)
    assert _found(tmp_path, src) == [("GT509", line)]
    p = tmp_path / "run_fit.py"
    p.write_text(textwrap.dedent(src).lstrip("\n"))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        runpy.run_path(str(p))


def test_same_calls_on_an_object_of_unknown_class_are_silent(tmp_path: Path) -> None:
    assert _found(tmp_path, TRAIN.replace("{CLASS}", "").replace("{RUN}", "")) == []
