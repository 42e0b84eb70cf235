"""Session-27 lead, static (docs/triage/lead27.md): GT536, NOTE [window starts one pass early].

Buggy twins (code and line), variants the real-world case does not show, silent look-alikes.
"""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

HEAD = """
import torch
import torch.nn.functional as F
"""

LOOP = HEAD + """
def train(model, loader, optimizer, accumulation_steps=4):
    for batch_idx, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accumulation_steps
        loss.backward()
        if batch_idx % accumulation_steps == 0:  # <- cause
            optimizer.step()
            optimizer.zero_grad()
"""

RANGE_METHOD = HEAD + """
class Trainer:
    def fit(self, num_steps):
        for it in range(num_steps):
            x, y = next(self.batches)
            (F.mse_loss(self.net(x), y) / self.accum).backward()
            if 0 == it % self.accum:  # <- cause
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
"""


def _codes(src: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), "t.py")]


def _marked(src: str) -> int:
    return next(i for i, ln in enumerate(textwrap.dedent(src).splitlines(), 1) if "<- cause" in ln)


@pytest.mark.parametrize("src", [LOOP, RANGE_METHOD], ids=["enumerate", "range_method"])
def test_window_starting_on_the_first_pass_is_named(src):
    assert ("GT536", _marked(src)) in _codes(src)


LOOK_ALIKES = {
    "plus_one": LOOP.replace("if batch_idx % accumulation_steps == 0:",
                             "if (batch_idx + 1) % accumulation_steps == 0:"),
    "counted_from_one": LOOP.replace("enumerate(loader)", "enumerate(loader, start=1)"),
    "last_of_window": LOOP.replace("== 0:", "== accumulation_steps - 1:"),
    "more_terms": LOOP.replace("if batch_idx % accumulation_steps == 0:",
                               "if batch_idx > 0 and batch_idx % accumulation_steps == 0:"),
    # the step at the top of the pass, before that pass's backward: it applies the last k
    "step_before_backward": HEAD + """
def train(model, loader, optimizer, k=4):
    for i, (x, y) in enumerate(loader):
        if i % k == 0:
            optimizer.step()
            optimizer.zero_grad()
        (F.cross_entropy(model(x), y) / k).backward()
""",
    # a periodic evaluation, no step under the remainder
    "zero_grad_only": LOOP.replace("            optimizer.step()\n", ""),
}


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_window_look_alikes_are_silent(name):
    assert not [c for c in _codes(LOOK_ALIKES[name]) if c[0] == "GT536"]


def test_engine_backward_is_left_alone():
    # accelerate/DeepSpeed: the engine's backward keeps its own count of micro-steps
    src = LOOP.replace("loss.backward()", "accelerator.backward(loss)")
    assert not [c for c in _codes(src) if c[0] == "GT536"]
