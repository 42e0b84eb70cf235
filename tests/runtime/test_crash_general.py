"""GT839: a crash no diagnosis claims is reported at the user's line (NOTE [general crash]).

Buggy twins of the held-out-6 crashes in other spellings and structure, each run on real
torch under ``gradtrace run``; look-alikes whose crash is the user's own (a missing file, a
KeyError in the user's dict, the user's raise, SystemExit...) get no GT839.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

BUGS = {
    # register_module is add_module's other name; the dotted name comes from an f-string
    "dotted_name_through_register_module": """
class Stack(nn.Module):
    def __init__(self, n):
        super().__init__()
        for i in range(n):
            self.register_module(f"layer.{i}", nn.Linear(4, 4))  # <- cause

Stack(2)
""",
    # a ModuleDict key that is a method of nn.Module, built in a loop over a list
    "moduledict_key_is_a_module_method": """
heads = nn.ModuleDict()
for name in ["cls", "train"]:
    heads[name] = nn.Linear(4, 2)  # <- cause
""",
    # a learning rate torch's optimizer rejects, given through a name
    "negative_learning_rate_given_to_adam": """
model = nn.Linear(4, 1)
rate = -1e-3
opt = torch.optim.Adam(model.parameters(), lr=rate)  # <- cause
""",
    # two parameter generators kept in names, then added
    "parameter_generators_added_by_name": """
enc, dec = nn.Linear(4, 4), nn.Linear(4, 2)
first = enc.parameters()
second = dec.parameters()
params = first + second  # <- cause
opt = torch.optim.SGD(params, lr=0.1)
""",
    # the plateau scheduler reached through a dict, stepped without its metric
    "plateau_scheduler_in_a_dict_stepped_bare": """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scheds = {"main": torch.optim.lr_scheduler.ReduceLROnPlateau(opt)}

def end_of_epoch():
    scheds["main"].step()  # <- cause

for epoch in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    end_of_epoch()
""",
    # a manual update with torch's in-place add over every parameter, one of them frozen
    "manual_add_over_a_frozen_parameter": """
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.mask = nn.Parameter(torch.ones(4), requires_grad=False)

    def forward(self, x):
        return self.fc(x) * self.mask

net = Gate()
net(torch.randn(2, 4)).sum().backward()
with torch.no_grad():
    for w in net.parameters():
        w.add_(w.grad, alpha=-0.1)  # <- cause
""",
    # an empty ModuleList filled by index inside a helper
    "empty_module_list_assigned_by_index": """
class Tower(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.stages = nn.ModuleList()
        self.fill(widths)

    def fill(self, widths):
        for k in range(len(widths) - 1):
            self.stages[k] = nn.Linear(widths[k], widths[k + 1])  # <- cause

Tower([4, 8, 2])
""",
    # a list of tensors saved as one argument; torch checks it after forward returned, so
    # the traceback ends at .apply (the call in forward is the line to change)
    "list_given_to_save_for_backward": """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward([x, w])  # <- cause
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x

w = torch.randn(3, requires_grad=True)
out = Scale.apply(torch.randn(3), w)
""",
    # shapes that torch.cat refuses, inside forward
    "concatenated_features_of_other_batch_sizes": """
class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, a, b):
        return self.fc(torch.cat([a, b], dim=1))  # <- cause

Fuse()(torch.randn(4, 4), torch.randn(3, 4))
""",
    # GradScaler stepping an optimizer whose network did not run this iteration
    "scaler_steps_an_optimizer_without_gradients": """
main, aux = nn.Linear(3, 1), nn.Linear(3, 1)
opts = [torch.optim.SGD(main.parameters(), lr=0.1), torch.optim.SGD(aux.parameters(), lr=0.1)]
scaler = torch.amp.GradScaler("cpu")
loss = main(torch.randn(4, 3)).pow(2).mean()
scaler.scale(loss).backward()
for o in opts:
    scaler.step(o)  # <- cause
scaler.update()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_crash_without_diagnosis_is_reported_at_the_users_line(run_script, name):
    src = HEAD + BUGS[name].lstrip("\n")
    res = run_script(src)
    assert res.code == 1, res.err
    assert res.findings, res.err
    lead = res.findings[0]
    assert lead["line"] == marked_line(src), res.findings
    if lead["code"] != "GT839":  # a static rule on the crashing line: it leads, confirmed
        assert lead["source"] == "static+runtime", lead
        assert any("(GT839)" in r["message"] for r in lead["related"]), lead
    assert lead["fix"]["title"], lead
    heading = "gradtrace: the error itself (" if lead["code"] == "GT839" else \
        "gradtrace: diagnosis ("  # (runtime24: a crash no finding explains is no diagnosis)
    assert heading in res.err and "Traceback" in res.err


def test_fix_line_names_what_to_change(run_script):
    res = run_script(HEAD + BUGS["plateau_scheduler_in_a_dict_stepped_bare"].lstrip("\n"))
    f = next(f for f in res.findings if f["code"] == "GT839")
    assert "metrics" in f["fix"]["title"] and "ReduceLROnPlateau.step()" in f["message"]


LOOK_ALIKES = {
    "missing_file": """
model = nn.Linear(4, 1)
state = torch.load(open("no_such_checkpoint.pt", "rb"))
""",
    "missing_file_given_to_torch_load": """
model = nn.Linear(4, 1)
model.load_state_dict(torch.load("no_such_checkpoint.pt"))
""",
    "key_error_in_the_users_dict_beside_a_tensor": """
model = nn.Linear(4, 1)
cfg = {"lr": 0.1}
loss = model(torch.randn(2, 4)).sum() * cfg["weight"]
""",
    "attribute_error_on_the_users_config": """
import types
cfg = types.SimpleNamespace(lr=0.1)
model = nn.Linear(4, 1)
out = model(torch.randn(2, 4)) * cfg.scale
""",
    "users_own_raise": """
model = nn.Linear(4, 1)
loss = model(torch.randn(2, 4)).sum()
if loss.abs() >= 0:
    raise ValueError("stop here")
""",
    "users_own_function_called_short": """
def combine(a, b):
    return a + b

x = torch.randn(3)
y = combine(x)
""",
    "list_index_of_tensors": """
batches = [torch.randn(2, 4) for _ in range(3)]
model = nn.Linear(4, 1)
out = model(batches[5])
""",
    "users_dataset_raises_key_error": """
class Data(torch.utils.data.Dataset):
    def __init__(self):
        self.rows = {0: torch.randn(4)}

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return self.rows[i]

for batch in torch.utils.data.DataLoader(Data(), batch_size=1):
    pass
""",
    "system_exit_after_training": """
import sys
model = nn.Linear(4, 1)
model(torch.randn(2, 4)).sum().backward()
sys.exit(3)
""",
    "keyboard_interrupt": """
model = nn.Linear(4, 1)
model(torch.randn(2, 4)).sum().backward()
raise KeyboardInterrupt
""",
    # the saved tensors unpacked, the shape kept on ctx: no crash
    "save_for_backward_of_tensors_only": """
class Pool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.save_for_backward(x)
        ctx.shape = shape
        return x.view(shape).sum(0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.expand(ctx.shape).reshape(x.shape), None

x = torch.randn(6, requires_grad=True)
Pool.apply(x, (2, 3)).sum().backward()
raise SystemExit(2)
""",
    "users_assert_on_a_tensor": """
x = torch.randn(3)
assert x.shape == (4,), "wrong shape"
""",
}


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_users_own_error_gets_no_general_finding(run_script, name):
    res = run_script(HEAD + LOOK_ALIKES[name].lstrip("\n"))
    assert res.code != 0, res.err
    assert "GT839" not in res.codes(), res.findings


def test_general_crash_ranks_after_what_the_run_saw(run_script):
    """A silent problem seen before the crash keeps the lead; the crash follows it."""
    src = HEAD + """
model, unused = nn.Linear(4, 1), nn.Linear(4, 1)
opt = torch.optim.SGD([*model.parameters(), *unused.parameters()], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
first, second = model.parameters(), unused.parameters()
both = first + second  # <- cause
""".lstrip("\n")
    res = run_script(src)
    seen = [f for f in res.findings if f["source"] != "static"]
    assert [f["code"] for f in seen][-1:] == ["GT839"] and len(seen) > 1, res.findings
    assert seen[-1]["line"] == marked_line(src)
    assert res.err.index("problems seen") < res.err.index("no specific diagnosis applies")


def test_trace_api_reports_the_general_crash():
    """``with gradtrace.trace()``: a torch error nothing explains is in ``tr.findings`` too."""
    import inspect

    import torch

    import gradtrace

    tr = gradtrace.trace(static=False)
    with pytest.raises(RuntimeError):
        with tr:
            a, b = torch.randn(2, 3), torch.randn(4, 5)
            torch.mm(a, b)  # MM
    lines, start = inspect.getsourcelines(test_trace_api_reports_the_general_crash)
    line = start + next(i for i, t in enumerate(lines) if t.rstrip().endswith("# MM"))
    got = [(f.code, f.line) for f in tr.findings]
    assert got == [("GT839", line)], got
    assert [f.code for f in tr.diagnosis] == ["GT839"]


def test_torch_failing_while_importing_its_own_module_is_not_the_users_argument(tmp_path):
    """A stand-in left in ``sys.modules`` breaks a module torch imports lazily inside the
    optimizer's constructor: no argument of the user's line is at fault, so no GT839 (in a
    fresh process: the lazy import happens once per process)."""
    import subprocess
    import sys

    prog = tmp_path / "prog.py"
    prog.write_text(HEAD + (
        "import sys\nimport types\n\n"
        "sys.modules['pandas'] = types.SimpleNamespace()\n"
        "model = nn.Linear(4, 1)\n"
        "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "gradtrace", "run", str(prog)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert res.returncode != 0 and "pandas" in res.stderr, res.stderr[-2000:]
    assert "GT839" not in res.stderr, res.stderr[-2000:]
