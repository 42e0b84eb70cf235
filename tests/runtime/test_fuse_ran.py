"""The fuse keeps static findings on the code that ran, torch-free helpers included
(NOTE [code that ran] in gradtrace.runtime.ran), and matches the runtime's symptoms to the
static findings that explain them (NOTE [ranking] in gradtrace.runtime.fuse). Real torch."""
from __future__ import annotations

import sys

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.findings import Finding
from gradtrace.runtime import fuse, ran

# someone else's trace function (coverage.py, a debugger) leaves the recorder off by design
needs_recorder = pytest.mark.skipif(sys.gettrace() is not None or sys.getprofile() is not None,
                                    reason="another trace function is installed")

# pytorch/examples#64: the learning rate written into the copy state_dict() returns, by a
# helper that never calls torch itself (the tracer never walks to its frame)
STATE_DICT_LR = """
import torch
import torch.nn as nn


def adjust_learning_rate(optimizer, epoch):
    lr = 0.1 * (0.1 ** epoch)
    for param_group in optimizer.state_dict()['param_groups']:
        param_group['lr'] = lr


model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), 0.1)
for epoch in range(2):
    if CALL:
        adjust_learning_rate(optimizer, epoch)
    for i in range(3):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
"""

# the same bug in another spelling: a warm-up object's method, called from the loop
WARMUP_METHOD = """
import torch
import torch.nn as nn


class Warmup:
    def __init__(self, optimizer, steps):
        self.optimizer, self.steps = optimizer, steps

    def update(self, step):
        self.optimizer.state_dict()["param_groups"][0]["lr"] = 0.1 * min(1.0, step / self.steps)


model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
warmup = Warmup(opt, 4)
for step in range(6):
    warmup.update(step)
    opt.zero_grad()
    model(torch.randn(4, 3)).pow(2).mean().backward()
    opt.step()
"""


def _found(res) -> list[tuple[str, int, str]]:
    return [(f["code"], f["line"], f["source"]) for f in res.findings]


@needs_recorder
def test_torch_free_helper_finding_kept_under_run(run_script):
    res = run_script(STATE_DICT_LR.replace("CALL", "True"))
    assert _found(res) == [("GT529", 7, "static")], res.err
    assert "found by reading the code that ran (1)" in res.err


@needs_recorder
def test_torch_free_method_twin_kept_under_run(run_script):
    res = run_script(WARMUP_METHOD)
    assert _found(res) == [("GT529", 10, "static")], res.err


def test_helper_that_never_ran_stays_out(run_script, tmp_path):
    # the checker still reports it; the run does not: the helper never executed
    res = run_script(STATE_DICT_LR.replace("CALL", "False"))
    assert [f.code for f in fuse.static_findings(str(tmp_path / "prog.py"))] == ["GT529"]
    assert res.code == 0 and res.findings == [], res.err


def test_method_of_a_class_that_ran_but_never_called_stays_out(run_script):
    # the class statement ran (and the object was built), but update() never did: a class
    # body's code object spans its methods' def lines, which must not count as their bodies
    later = '        self.optimizer.state_dict()["param_groups"][0]["lr"] = 0.1 * min(1.0, step / self.steps)\n'
    src = WARMUP_METHOD.replace("    warmup.update(step)\n", "").replace(
        later, later + "\n    def lr(self):\n        return self.optimizer.param_groups[0]['lr']\n")
    assert "def lr" in src
    res = run_script(src)
    assert res.code == 0 and res.findings == [], res.err


def test_someone_elses_trace_function_is_left_alone():
    prev = sys.gettrace()
    events: list[str] = []

    def theirs(frame, event, arg):
        events.append(event)

    sys.settrace(theirs)
    try:
        with gradtrace.trace():
            assert sys.gettrace() is theirs
            torch.ones(2).sum()
        assert sys.gettrace() is theirs
    finally:
        sys.settrace(prev)
    assert "call" in events


@needs_recorder
@pytest.mark.skipif(hasattr(sys, "monitoring"), reason="sys.monitoring records all session")
def test_recorder_stops_after_the_first_steps():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradtrace.trace():
        assert sys.gettrace() is ran._call
        for _ in range(ran.RAN_STEPS):
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
        assert sys.gettrace() is None  # the slow path costs too much past the first steps
    assert sys.gettrace() is None


# A layer whose last op is a Conv, its raw scores into BCELoss: the run names the op inside
# forward that made the input (GT838), the checker the model call (GT760), which leads.
RAW_SCORES = """
import torch
import torch.nn as nn


class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 4, 3, padding=1)
        self.score = nn.Conv2d(4, 1, 1)

    def forward(self, x):
        return HEAD


torch.manual_seed(0)
model = Segmenter()
criterion = nn.BCELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x, mask = torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2, 1, 8, 8)).float()
    opt.zero_grad()
    out = model(x)
    loss = criterion(out, mask)
    loss.backward()
    opt.step()
"""


def test_static_line_leads_bce_on_raw_scores(run_script):
    res = run_script(RAW_SCORES.replace("HEAD", "self.score(torch.relu(self.body(x)))"))
    assert res.code == 1 and _found(res)[:1] == [("GT760", 22, "static+runtime")], res.err
    assert any("(GT838)" in r["message"] for r in res.findings[0]["related"])


def test_probabilities_into_bce_stay_silent(run_script):
    res = run_script(RAW_SCORES.replace("HEAD", "torch.sigmoid(self.score(self.body(x)))"))
    assert res.code == 0 and res.findings == [], res.err


# Router auxiliary losses collected with torch.tensor(list of tensors): the run sees two cuts
# on the router's path (the argmax routing, by design, and the rebuilt tensor); the one the
# checker also reports (GT104 on the rebuilt tensor) leads.
ROUTER = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 3)
        self.aux = None

    def forward(self, x):
        probs = F.softmax(self.proj(x), dim=-1)
        self.aux = probs.mean(0).pow(2).sum()
        return probs.argmax(dim=-1)


class Mixture(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = Router()
        self.experts = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))

    def forward(self, x):
        pick = self.router(x)
        return torch.stack([self.experts[int(k)](row) for k, row in zip(pick, x)])


torch.manual_seed(0)
blocks = nn.ModuleList([Mixture(), Mixture()])
opt = torch.optim.Adam(blocks.parameters(), lr=1e-3)
x, y = torch.randn(10, 6), torch.randn(10, 6)
for _ in range(3):
    h = x
    for b in blocks:
        h = b(h)
    aux = COLLECT([b.router.aux for b in blocks]).sum()
    loss = F.mse_loss(h, y) + 0.01 * aux
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_cut_both_faces_see_leads_the_other(run_script):
    res = run_script(ROUTER.replace("COLLECT", "torch.tensor"))
    # the routing argmax (line 15) only picks experts: its value never reaches a graph-building
    # op, so it is no cause of the router's missing gradient (NOTE [cut that reaches the loss])
    assert [(c, line) for c, line, _ in _found(res)] == [("GT102", 37)], res.err
    assert res.findings[0]["source"] == "static+runtime"


def test_router_losses_stacked_stay_silent(run_script):
    res = run_script(ROUTER.replace("COLLECT", "torch.stack"))
    assert res.code == 0 and res.findings == [], res.err


# Parameters kept in a plain dict on a module: the run does not watch them (no symptom), so a
# clean run does not refute the static GT401.
PARAM_DICT = """
import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 2)
        self.affine = CONTAINER({'w': nn.Parameter(torch.ones(1, 2)), 'b': nn.Parameter(torch.zeros(1, 2))})

    def forward(self, x):
        return self.encoder(x) * self.affine['w'] + self.affine['b']


model = Scaled()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 2)
for _ in range(3):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
"""


def test_plain_dict_of_parameters_not_refuted(run_script):
    res = run_script(PARAM_DICT.replace("CONTAINER", ""))
    assert _found(res) == [("GT401", 9, "static")], res.err


def test_parameter_dict_stays_silent(run_script):
    res = run_script(PARAM_DICT.replace("CONTAINER", "nn.ParameterDict"))
    assert res.code == 0 and res.findings == [], res.err


def _finding(code: str, line: int, source: str = "runtime") -> Finding:
    return Finding(code, "x", "m", "/p/train.py", line, severity="error", source=source)  # type: ignore[arg-type]


def test_dead_loss_term_explained_by_the_cut_in_its_function():
    # the run names the second argmax of one term (GT844), the checker the first (GT108)
    out = fuse.fuse([_finding("GT844", 32)], [_finding("GT108", 31, "static")],
                    {"/p/train.py": [(28, 37)]})
    assert [(f.code, f.line, f.source) for f in out] == [("GT108", 31, "static+runtime")]
    assert any("(GT844)" in r.message for r in out[0].related)


def test_no_reordering_when_the_program_crashed():
    runtime = [_finding("GT108", 23), _finding("GT102", 39)]
    static = [_finding("GT104", 39, "static")]
    quiet = fuse.fuse(runtime, static, {}, None)
    crashed = fuse.fuse(runtime, static, {}, ("/p/train.py", 50))
    assert [f.line for f in quiet] == [39, 23] and [f.line for f in crashed] == [23, 39]
