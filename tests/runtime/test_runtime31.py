"""Session 31 run-time cuts (docs/triage/runtime31.md): a warm-up that ends once armed steps
learn nothing (NOTE [quiet warm-up]), warms up again on a new line, keeps the user's bits, and
accumulation windows counted on the steps whose backward() calls were seen."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace
from gradtrace.runtime.pace import WARM_STEPS
from gradtrace.runtime.trace.quiet import MIN_WARM, QUIET_STEPS


def _loop(tr=None, steps=WARM_STEPS + 24, late=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    armed = []
    for i in range(steps):
        armed.append(tr is not None and tr.arming.armed)
        opt.zero_grad()
        out = model(x)
        if late is not None and i >= late:
            out = late_branch(out)
        F.mse_loss(out, y).backward()
        opt.step()
    return armed, [p.detach().clone() for p in model.parameters()]


def late_branch(out):
    return out * torch.sigmoid(out).detach()  # a new line: a detach the first steps never ran


def test_repeating_loop_ends_its_warm_up_early_with_the_same_bits():
    _, plain = _loop()
    with gradtrace.trace() as tr:
        armed, traced = _loop(tr)
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))
    # the first step learns the loop, the second its steady state; three quiet ones end it
    assert armed[:MIN_WARM] == [True] * MIN_WARM
    assert sum(armed[:WARM_STEPS]) < WARM_STEPS
    assert not all(armed[MIN_WARM:MIN_WARM + QUIET_STEPS + 1])


def test_fixed_every_and_every_one_keep_their_steps():
    with gradtrace.trace(every=1) as tr:
        armed, _ = _loop(tr)
    assert all(armed)
    with gradtrace.trace(every=5) as tr:
        armed, _ = _loop(tr)
    assert armed[:WARM_STEPS] == [True] * WARM_STEPS


def test_paced_step_on_a_new_line_warms_up_again():
    late = WARM_STEPS + 4
    with gradtrace.trace() as tr:
        armed, _ = _loop(tr, steps=late + 200, late=late)
    first = next(i for i in range(late, len(armed)) if armed[i])
    # the armed step that met the detach is followed by consecutive armed steps
    assert armed[first + 1:first + 1 + QUIET_STEPS] == [True] * QUIET_STEPS
    cuts = {c.site.line for _, c in tr.state._cut_cache.values()}
    assert late_branch.__code__.co_firstlineno + 1 in cuts


ACCUM = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(4 * 60):
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    (F.cross_entropy(model(x), y) / 4).backward()
    if i % 4 == 0:  # <- cause
        opt.step()
        opt.zero_grad()
"""


def test_accumulation_window_on_a_long_run(tmp_path):
    """60 steps, most of them unarmed: their windows (no backward() seen) are not counted as
    empty ones (an empty window is not a measured one)."""
    path = tmp_path / "accum.py"
    path.write_text(ACCUM)
    code = compile(ACCUM, str(path), "exec")
    with gradtrace.trace(static=False) as tr:
        exec(code, {"__name__": "__main__", "__file__": str(path)})
    hits = [(f.code, f.line) for f in tr.findings if f.code == "GT879"]
    line = next(n for n, text in enumerate(ACCUM.splitlines(), 1) if "<- cause" in text)
    assert hits == [("GT879", line)]


def test_accumulation_look_alike_stays_silent_on_a_long_run(tmp_path):
    good = ACCUM.replace("if i % 4 == 0:  # <- cause", "if (i + 1) % 4 == 0:")
    path = tmp_path / "accum_ok.py"
    path.write_text(good)
    with gradtrace.trace(static=False) as tr:
        exec(compile(good, str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})
    assert not [f for f in tr.findings if f.code == "GT879"]
