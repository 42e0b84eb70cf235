"""Shapes from the projects of docs/triage/unseen40.md (session 40), each in another spelling
than the project's and next to a buggy twin that is still reported; each runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # PRCinguhou/domain-adaptation (`train.py`, M3SDA): a retained backward, the step, then a
    # loss summed over a `for index, batch in enumerate(...)` loop after the step. GT601 looked
    # for the graph's values among the bindings the later loss reads, the loop's targets
    # among them: a target has no value and the rule crashed (GT002). Look-alike: the target
    # features are computed again after the step; twin: they are not, the kept graph is read
    "loss-summed-over-a-loop-after-the-step": (Shape("""
        extractor = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4))
        clf = nn.Linear(4, 2)
        opt = torch.optim.SGD(list(extractor.parameters()) + list(clf.parameters()), lr=0.1)
        src = [torch.randn(2, 3) for _ in range(2)]
        tar = torch.randn(2, 3)
        for epoch in range(2):
            tar_feature = extractor(tar)
            loss = clf(tar_feature).sum()
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
            opt.zero_grad()
            tar_feature = extractor(tar)
            loss = 0
            for index, batch in enumerate(src):
                loss += clf(extractor(batch)).sum() - clf(tar_feature).mean()
            loss.backward()
            opt.step()
        """, "GT601"), Shape("""
        extractor = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4))
        clf = nn.Linear(4, 2)
        opt = torch.optim.SGD(list(extractor.parameters()) + list(clf.parameters()), lr=0.1)
        src = [torch.randn(2, 3) for _ in range(2)]
        tar = torch.randn(2, 3)
        for epoch in range(2):
            tar_feature = extractor(tar)
            loss = clf(tar_feature).sum()
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
            opt.zero_grad()
            loss = 0
            for index, batch in enumerate(src):
                loss += clf(extractor(batch)).sum() - clf(tar_feature).mean()
            loss.backward()
            opt.step()
        """, "GT601", line=15, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_no_internal_error_on_a_loop_target_after_the_step() -> None:
    """The look-alike above crashed GT601 (GT002) before its fix: the whole file, every rule."""
    import textwrap

    from gradtrace.lint import check_source
    look_alike = SHAPES["loss-summed-over-a-loop-after-the-step"][0]
    source = PRELUDE + textwrap.dedent(look_alike.src).lstrip("\n")
    assert [f.code for f in check_source(source, "shape.py") if f.code == "GT002"] == []
