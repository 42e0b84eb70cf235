"""inplace40: an in-place write into the output of a block whose ``forward`` loops over an
appended ``nn.ModuleList`` (NOTE [looped layers]) is a write into what the LAST kept layer
gives back; that layer may come from a helper that picks its class from a dict
(``{"ReLU": nn.ReLU}[cfg["type"]]()``) and be kept by an ``if act_cfg:`` on a config passed on
from the enclosing constructor. Each shape is run under torch too: the buggy ones raise at
backward, the look-alikes train."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

HEAD = '''
import torch
import torch.nn as nn


def make_act(spec):
    return {SPEC}[spec["kind"]]()


class Stack(nn.Module):
    def __init__(self, dims, act_spec=dict(kind="x"), norm=True):
        super().__init__()
        self.parts = nn.ModuleList()
        for a, b in zip(dims[:-1], dims[1:]):
            self.parts.append(nn.Linear(a, b))
            if norm:
                self.parts.append(nn.LayerNorm(b))
            if {KEEP}:
                self.parts.append(make_act(act_spec))

    def forward(self, h):
        for part in self.parts:
            h = part(h)
        return h


class Cell(nn.Module):
    def __init__(self, d, act_spec={ARG}):
        super().__init__()
        self.body = Stack([d, d], act_spec=act_spec)

    def forward(self, x):
        y = self.body(x)
        {WRITE}
        return y.sum()


x = torch.randn(3, 4, requires_grad=True)
Cell(4)(x).backward()
'''


def _source(spec: str, keep: str, arg: str, write: str) -> str:
    return HEAD.replace("{SPEC}", spec).replace("{KEEP}", keep).replace(
        "{ARG}", arg).replace("{WRITE}", write)


WRITE_LINE = HEAD.splitlines().index("        {WRITE}") + 1

BUGGY = [  # (the dict of classes, the test keeping the act, the config given, write, code)
    ('{"ReLU": nn.ReLU}', "act_spec", 'dict(kind="ReLU")', "y += x", "GT603"),
    ('{"sig": nn.Sigmoid}', "act_spec is not None", '{"kind": "sig"}', "y.mul_(2.0)", "GT602"),
    ('{"t": nn.Tanh}', "act_spec", 'dict(kind="t")', "y -= x", "GT602"),
]
LOOKALIKES = [
    # the act left out: the last layer is the LayerNorm, whose output backward does not read
    ('{"ReLU": nn.ReLU}', "act_spec", "None", "y += x"),
    # GELU's backward reads its input, not its output
    ('{"GELU": nn.GELU}', "act_spec", 'dict(kind="GELU")', "y += x"),
    # a class chosen among two: which one is not known
    ('{"ReLU": nn.ReLU, "GELU": nn.GELU}', "act_spec", 'dict(kind="GELU")', "y += x"),
    # written out of place
    ('{"ReLU": nn.ReLU}', "act_spec", 'dict(kind="ReLU")', "y = y + x"),
]


@pytest.mark.parametrize("spec,keep,arg,write,code", BUGGY)
def test_write_into_last_looped_activation_is_reported(spec, keep, arg, write, code):
    src = _source(spec, keep, arg, write)
    got = [(f.code, f.line) for f in check_source(src) if f.code.startswith("GT60")]
    assert got == [(code, WRITE_LINE)]
    with pytest.raises(RuntimeError, match="inplace operation"):
        exec(compile(src, "<buggy>", "exec"), {})


@pytest.mark.parametrize("spec,keep,arg,write", LOOKALIKES)
def test_lookalikes_stay_silent(spec, keep, arg, write):
    src = _source(spec, keep, arg, write)
    assert [f for f in check_source(src) if f.code.startswith("GT60")] == []
    exec(compile(src, "<lookalike>", "exec"), {})


def test_act_kept_by_the_loop_index_is_not_known():
    """``if i < n - 1:`` keeps the act on every layer but the last: the last is unknown."""
    src = _source('{"ReLU": nn.ReLU}', "act_spec", 'dict(kind="ReLU")', "y += x").replace(
        "for a, b in zip(dims[:-1], dims[1:]):", "for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):"
    ).replace("            if act_spec:", "            if act_spec and i < len(dims) - 2:")
    assert [f for f in check_source(src) if f.code.startswith("GT60")] == []
    exec(compile(src, "<lookalike>", "exec"), {})


def _local_list(src: str) -> str:
    """The same Stack filling a local list first, then ``nn.ModuleList(parts)``."""
    src = src.replace("        self.parts = nn.ModuleList()\n", "        parts = []\n")
    src = src.replace("self.parts.append(", "parts.append(")
    return src.replace("    def forward(self, h):",
                       "        self.parts = nn.ModuleList(parts)\n\n    def forward(self, h):", 1)


def test_local_list_given_to_module_list():
    src = _local_list(_source('{"ReLU": nn.ReLU}', "act_spec", 'dict(kind="ReLU")', "y += x"))
    assert "parts = []" in src and "nn.ModuleList(parts)" in src
    assert [(f.code, f.line) for f in check_source(src) if f.code.startswith("GT60")] == [
        ("GT603", src.splitlines().index("        y += x") + 1)]
    with pytest.raises(RuntimeError, match="inplace operation"):
        exec(compile(src, "<buggy>", "exec"), {})
    quiet = _local_list(_source('{"ReLU": nn.ReLU}', "act_spec", "None", "y += x"))
    assert [f for f in check_source(quiet) if f.code.startswith("GT60")] == []
    exec(compile(quiet, "<lookalike>", "exec"), {})
    late = src.replace("        self.parts = nn.ModuleList(parts)\n",
                       "        self.parts = nn.ModuleList(parts)\n        parts.append(nn.Identity())\n")
    assert [f for f in check_source(late) if f.code.startswith("GT60")] == []
