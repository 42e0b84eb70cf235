"""Shapes from the false alarms unseen53a/b left (docs/triage/prec53.md, session 53), each in
another spelling than the project's, next to a buggy twin still reported; run on real torch."""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

# a `forward` whose keyword-only flag picks an ensemble arm that sharpens `sigmoid`'s saved
# output in place; the project's callers are in another file
NET = '''
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 3)

    def forward(self, x, *, ensemble=None):
        p = torch.sigmoid(self.body(x))
        if ensemble:
            p *= torch.sigmoid(self.body(x.flip(0))).flip(0)
            return p
        return p
'''

RUN = '''
import torch
from net import Scorer

torch.manual_seed(0)
net = Scorer()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(5, 4)
for _ in range(2):
    opt.zero_grad()
    loss = net({train_call}).sum()
    loss.backward()
    opt.step()
net.eval()
with torch.inference_mode():
    final = net(x, ensemble=True)
'''


@pytest.mark.parametrize("train_call,line", [
    ("x", None),                   # training leaves the flag off; only inference sets it
    ("x, ensemble=True", 14),      # training takes the in-place arm: backward raises
])
def test_flag_arm_for_inference(tmp_path, monkeypatch, train_call: str,
                                line: int | None) -> None:
    """GT602 in the arm of ``if ensemble:`` (a keyword-only flag, default None): silent when
    every call of the project setting the flag runs with grad off, reported when training
    sets it."""
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "run.py").write_text(RUN.format(train_call=train_call))
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings
             if f.code in ("GT602", "GT603")]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT602")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("net", None)
    code = compile(RUN.format(train_call=train_call), str(tmp_path / "run.py"), "exec")
    env: dict = {}
    if line is None:
        exec(code, env)
        assert env["final"].shape == (5, 3)
    else:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            exec(code, env)
