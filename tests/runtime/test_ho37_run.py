"""Held-out batch 37 (docs/triage/ho37.md) at run time: GT880 (DDP's reducer waited for
parameters that got no gradient) names the `DistributedDataParallel(...)` call itself when a
helper builds the wrapper and returns it (NOTE [wrapper built here]), not the caller's line
that receives it; the look-alike passes `find_unused_parameters=True` in the same helper and
runs clean. One process (a one-rank gloo group in this process), two steps, a tiny model."""
from __future__ import annotations

import runpy

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

PROGRAM = """
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.score = nn.Linear(4, 1)
        self.aux = nn.Linear(4, 2)
    def forward(self, x):
        h = self.trunk(x)
        return self.score(h), self.aux(h)

def wrap(net, unused):
    if unused:
        return DistributedDataParallel(net, find_unused_parameters=True)
    return DistributedDataParallel(net)

def train(unused):
    torch.manual_seed(0)
    model = wrap(TwoHeads(), unused)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        score, _ = model(torch.randn(3, 4))
        opt.zero_grad()
        score.sum().backward()
        opt.step()
    return model
"""


@pytest.fixture
def one_rank_group(tmp_path):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("no gloo backend")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("unused", [False, True])
def test_ddp_built_in_a_helper_is_named_there(tmp_path, one_rank_group, unused: bool) -> None:
    import gradtrace
    from gradtrace.runtime.distributed.ranks import rank_session

    path = tmp_path / "prog.py"
    path.write_text(PROGRAM, encoding="utf-8")
    train = runpy.run_path(str(path))["train"]
    found, error = [], ""
    with gradtrace.trace() as tr, rank_session(tr, check_sync=0) as rs:
        try:
            train(unused)
        except RuntimeError as exc:
            error = str(exc)
            found = rs.diagnose(exc)
    if unused:  # the look-alike: the same helper asks DDP to look for unused parameters
        assert error == "" and not [f for f in tr.findings if f.code == "GT880"]
    else:  # the buggy twin: named on the DDP(...) call in the helper, not on `wrap(...)`
        assert "finished reduction" in error
        assert [(f.code, f.line) for f in found] == [("GT880", 19)], found


def test_two_groups_crash_is_explained_by_the_loop_that_gathers_twice() -> None:
    """GT817 (a parameter in two groups, at the optimizer) in the file that holds GT562 (a loop
    over `modules()` gathering the recursive parameters of the model): GT562's line leads,
    confirmed; GT817 alone (nothing static explains it) stays on the optimizer."""
    from gradtrace.findings import Finding
    from gradtrace.runtime import fuse

    static = [Finding("GT562", "module-parameters-gathered-twice", "m", "/x/opt.py", 35, 13)]
    runtime = [Finding("GT817", "parameter-in-two-groups", "r", "/x/opt.py", 71, 13)]
    out = fuse.fuse(runtime, static, {"/x/opt.py": [(1, 80)]})
    assert (out[0].code, out[0].line, out[0].source) == ("GT562", 35, "static+runtime")
    alone = fuse.fuse(runtime, [], {"/x/opt.py": [(1, 80)]})
    assert (alone[0].code, alone[0].line) == ("GT817", 71)
