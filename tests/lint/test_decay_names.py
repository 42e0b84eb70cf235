"""GT463: a no-decay name list that matches none of the model's normalisation weights. On torch,
the buggy twins put a LayerNorm weight in the decayed group; the look-alikes do not."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

MODEL = """\
import torch
import torch.nn as nn
class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.dim = dim
        self.ln_1 = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self.head = nn.Linear(dim, 2, bias=False)
    def forward(self, x):
        for layer in self.layers:
            x = layer(self.ln_1(x))
        return self.head(x)
"""

BUGS = [
    # a module-level list, tested inside the no-decay group's dict
    """
    model = Block()
    no_decay = ["bias", "LayerNorm.weight"]  # HERE
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay)], "weight_decay": 0.1},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    """,
    # a default argument of the helper that builds the groups
    """
    def grouped(model, wd, no_decay_names=("bias", "LayerNorm.weight", "layer_norm.weight")):  # HERE
        return [
            {"params": [p for n, p in model.named_parameters()
                        if not any(nd in n for nd in no_decay_names)], "weight_decay": wd},
            {"params": [p for n, p in model.named_parameters()
                        if any(nd in n for nd in no_decay_names)], "weight_decay": 0.0}]
    model = Block()
    groups = grouped(model, 0.1)
    """,
    # the comprehension assigned to a name that the no-decay group holds
    """
    model = Block()
    skip = ["bias", "norm.weight"]  # HERE
    decay = [p for n, p in model.named_parameters() if not any(s in n for s in skip)]
    exempt = [p for n, p in model.named_parameters() if any(s in n for s in skip)]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": exempt, "weight_decay": 0}]
    """,
]

LOOK_ALIKES = [
    # a fragment the norm's name contains
    """
    model = Block()
    no_decay = ["bias", "ln_1.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay)], "weight_decay": 0.1},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    """,
    # lower-cased names: "ln_" matches
    """
    model = Block()
    no_decay = ["bias", "LayerNorm.weight", "ln_"]
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n.lower() for nd in no_decay)], "weight_decay": 0.1},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n.lower() for nd in no_decay)], "weight_decay": 0.0}]
    """,
    # norms without weights: nothing to exempt
    """
    class NoAffine(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(8, elementwise_affine=False)
            self.fc = nn.Linear(8, 8)
        def forward(self, x):
            return self.fc(self.ln_1(x))
    model = NoAffine()
    no_decay = ["bias", "LayerNorm.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay)], "weight_decay": 0.1},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    """,
    # a list that picks the decayed group (not an exemption)
    """
    model = Block()
    extra = ["lora_A", "lora_B"]
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in extra)], "weight_decay": 0.1},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in extra)], "weight_decay": 0.2}]
    """,
]


def _run(body: str) -> tuple[list[int], str, dict]:
    src = MODEL + textwrap.dedent(body)
    lines = [f.line for f in check_source(src, path="case.py", select=["GT463"])]
    ns: dict = {}
    exec(compile(src, "case.py", "exec"), ns)
    return lines, src, ns


def _ln_decayed(ns: dict) -> bool:
    ln = ns["model"].ln_1.weight
    return any(any(p is ln for p in g["params"]) for g in ns["groups"] if g["weight_decay"] > 0)


@pytest.mark.parametrize("body", BUGS)
def test_norm_weights_decayed_reported_on_the_list(body):
    lines, src, ns = _run(body)
    marked = next(i for i, line in enumerate(src.splitlines(), 1) if line.endswith("# HERE"))
    assert lines == [marked]
    assert _ln_decayed(ns)


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent(body):
    lines, _, ns = _run(body)
    assert lines == []
    assert ns["model"].ln_1.weight is None or not _ln_decayed(ns) or "extra" in ns
