"""Torch warnings that reveal a bug become findings at the user's line (NOTE [revealing
warnings]); the warning itself still prints as without gradtrace. Each: a twin in other
spellings and a silent look-alike, on real torch under ``gradtrace run``."""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

BUGS = {
    # L1Loss module, predictions (B, 1) against labels (B,)
    "l1_loss_module_column_against_vector": ("GT842", """
model = nn.Linear(3, 1)
crit = nn.L1Loss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 3), torch.randn(16)
for _ in range(2):
    loss = crit(model(x), y)  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # functional smooth_l1 in a helper, the target unsqueezed the wrong way
    "smooth_l1_in_helper_target_unsqueezed": ("GT842", """
def regression_loss(pred, target):
    return F.smooth_l1_loss(pred.squeeze(-1), target.unsqueeze(1))  # <- cause

head = nn.Linear(3, 1)
loss = regression_loss(head(torch.randn(8, 3)), torch.randn(8))
loss.backward()
"""),
    # a lambda hook registered on a residual block (several autograd nodes)
    "lambda_backward_hook_on_residual_block": ("GT857", """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x

grads = []
block = Block()
block.register_backward_hook(lambda m, gi, go: grads.append(gi[0]))  # <- cause
block(torch.randn(2, 4, requires_grad=True)).sum().backward()
"""),
    # a method registered as the hook from inside the model's __init__
    "method_backward_hook_on_sequential": ("GT857", """
class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
        self.seen = None
        self.body.register_backward_hook(self.keep)  # <- cause

    def keep(self, module, grad_in, grad_out):
        self.seen = grad_in

    def forward(self, x):
        return self.body(x)

Probe()(torch.randn(3, 4, requires_grad=True)).sum().backward()
"""),
    # a Linear over an input that requires grad: grad_input[0] is the bias gradient
    "backward_hook_on_linear_reads_grad_input": ("GT857", """
saliency = {}
fc = nn.Linear(6, 2)

def keep(module, grad_input, grad_output):
    saliency["x"] = grad_input[0]

fc.register_backward_hook(keep)  # <- cause
x = torch.randn(5, 6, requires_grad=True)
fc(x).sum().backward()
"""),
    # checkpoint_sequential (reentrant) over a batch that needs no grad
    "reentrant_checkpoint_sequential": ("GT205", """
from torch.utils.checkpoint import checkpoint_sequential
net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
x = torch.randn(2, 4)
out = checkpoint_sequential(net, 2, x, use_reentrant=True)  # <- cause
out.sum().backward()
"""),
    # the twin: `scheduler.step()` without the epoch, before the first optimizer step: the
    # schedule runs one epoch ahead
    "scheduler_stepped_without_an_epoch_first": ("GT515", """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=1.0)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
seen = []
for epoch in range(4):
    sched.step()  # <- cause
    seen.append(opt.param_groups[0]["lr"])
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
assert [round(v, 6) for v in seen] == [1.0, 0.1, 0.1, 0.01]
"""),
    # one group lists the head's weight twice (a list and one extra tensor)
    "duplicate_tensor_in_a_group_dict": ("GT435", """
model = nn.Linear(4, 2)
opt = torch.optim.Adam([{"params": [*model.parameters(), model.weight]}], lr=1e-3)  # <- cause
"""),
    # clip_grad_norm_ given the generator the optimizer already consumed
    "clip_with_a_consumed_generator": ("GT405", """
model = nn.Linear(4, 1)
params = model.parameters()
opt = torch.optim.SGD(params, lr=0.1)
loss = model(torch.randn(8, 4)).pow(2).mean()
loss.backward()
torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)  # <- cause
opt.step()
"""),
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_revealing_warning_is_a_finding_at_the_users_line(run_script, name):
    code, body = BUGS[name]
    src = HEAD + body.lstrip("\n")
    res = run_script(src)
    assert res.code == 0, res.err
    got = [(f["code"], f["line"]) for f in res.findings]
    assert (code, marked_line(src)) in got, (got, res.err)


def test_warning_prints_as_without_gradtrace(tmp_path, forked):
    """The warning lines are those plain Python shows, under a real run: ``python prog.py``
    and ``gradtrace run prog.py``, each in a process of its own with real streams, forked from
    the rank server (tests/conftest.py ``forked``: torch imported once, not twice)."""
    (tmp_path / "prog.py").write_text(HEAD + BUGS["l1_loss_module_column_against_vector"][1]
                                      .lstrip("\n"), encoding="utf-8")

    def warned(*argv: str, script: bool) -> tuple[list[str], str]:
        out = tmp_path / "out.txt"
        out.unlink(missing_ok=True)
        forked({"argv": [*argv, str(tmp_path / "prog.py")], "cwd": str(tmp_path), "env": {},
                "out": str(out), "world": 1, "timeout": 300, "script": script})
        err = out.read_text()
        return [ln for ln in err.splitlines() if "Warning:" in ln], err

    plain, _ = warned(script=True)
    traced, err = warned("run", script=False)
    # same warnings, same words; the tracer only ever moves a location inside torch's dispatch
    # to gradtrace's mode onto the user's line (_relocate_warnings)
    assert plain and [ln.split(": ", 1)[1] for ln in traced] == \
        [ln.split(": ", 1)[1] for ln in plain], (plain, traced)
    assert "GT842" in err


LOOK_ALIKES = {
    "same_shapes_after_squeeze": """
model = nn.Linear(3, 1)
x, y = torch.randn(16, 3), torch.randn(16)
loss = F.mse_loss(model(x).squeeze(-1), y)
loss.backward()
""",
    "full_backward_hook_on_block": """
block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
block.register_full_backward_hook(lambda m, gi, go: None)
block(torch.randn(2, 4, requires_grad=True)).sum().backward()
""",
    # an elementwise module fed by a computed tensor: one autograd node, its input's
    "old_hook_on_a_single_op_module": """
lin, act = nn.Linear(4, 4), nn.ReLU()
act.register_backward_hook(lambda m, gi, go: None)
act(lin(torch.randn(2, 4))).sum().backward()
""",
    # one conv node over an image that requires grad: torch warns, grad_input[0] is the image's
    "old_hook_on_a_conv_over_a_leaf_image": """
conv = nn.Conv2d(3, 4, 3)
grads = []
conv.register_backward_hook(lambda m, gi, go: grads.append(gi[0]))
image = torch.rand(1, 3, 8, 8).requires_grad_(True)
conv(image).sum().backward()
assert grads[0].shape == image.shape
""",
    "torch_tensor_of_a_target_without_grad": """
labels = torch.randint(0, 3, (4,))
target = torch.tensor(labels)
model = nn.Linear(4, 3)
F.cross_entropy(model(torch.randn(4, 4)), target).backward()
""",
    "torch_tensor_of_logits_under_no_grad": """
model = nn.Linear(4, 3)
with torch.no_grad():
    snapshot = torch.tensor(model(torch.randn(2, 4)))
""",
    "non_reentrant_checkpoint": """
from torch.utils.checkpoint import checkpoint
net = nn.Linear(4, 1)
out = checkpoint(net, torch.randn(2, 4), use_reentrant=False)
out.sum().backward()
""",
    "distinct_groups": """
model = nn.Linear(4, 2)
opt = torch.optim.Adam([{"params": [model.weight]}, {"params": [model.bias], "lr": 1e-2}])
""",
    # pytorch-made's run.py: `scheduler.step(epoch)` at the top of each epoch sets the
    # schedule to that epoch: torch warns on the order, yet no value is skipped
    "scheduler_stepped_to_an_explicit_epoch": """
import warnings
warnings.simplefilter("ignore", DeprecationWarning)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=1.0)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
seen = []
for epoch in range(4):
    sched.step(epoch)
    seen.append(opt.param_groups[0]["lr"])
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
assert [round(v, 6) for v in seen] == [1.0, 1.0, 0.1, 0.1]
""",
    "clip_with_a_fresh_generator": """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(8, 4)).pow(2).mean().backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_look_alike_draws_no_finding(run_script, name):
    res = run_script(HEAD + LOOK_ALIKES[name].lstrip("\n"))
    assert res.code == 0, res.err
    assert not res.findings, res.findings


def test_non_leaf_grad_read_on_an_unarmed_step():
    """The warning names a non-leaf .grad read the unarmed tracer's mode did not see."""
    import inspect
    import warnings

    import torch
    import torch.nn as nn

    import gradtrace
    from gradtrace.runtime.pace import WARM_STEPS

    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        with gradtrace.trace(every=1000, static=False) as tr:
            for i in range(WARM_STEPS + 3):
                opt.zero_grad()
                h = model(torch.randn(8, 4))
                h.pow(2).mean().backward()
                if i == WARM_STEPS + 1:
                    seen = h.grad  # READ
                opt.step()
    assert seen is None
    lines, start = inspect.getsourcelines(test_non_leaf_grad_read_on_an_unarmed_step)
    line = start + next(i for i, t in enumerate(lines) if t.rstrip().endswith("# READ"))
    assert ("GT307", line) in [(f.code, f.line) for f in tr.findings], tr.findings


def test_checkpoint_seen_twice_is_one_finding(run_script):
    """The checkpoint line is named by torch's warning and by the parameters it left without
    gradients: one finding there."""
    src = HEAD + """
from torch.utils.checkpoint import checkpoint
frozen, block, head = nn.Linear(4, 4).requires_grad_(False), nn.Linear(4, 1), nn.Linear(4, 1)
opt = torch.optim.SGD([*block.parameters(), *head.parameters()], lr=0.1)
for _ in range(2):
    x = torch.randn(2, 4)
    h = checkpoint(block, frozen(x), use_reentrant=True)  # <- cause
    opt.zero_grad()
    (h.sum() + head(x).sum()).backward()
    opt.step()
""".lstrip("\n")
    res = run_script(src)
    at = [f["code"] for f in res.findings if f["line"] == marked_line(src)]
    assert at.count("GT205") == 1, res.findings
