"""A crash explained by a number that left the graph in the same step: the ``.item()`` line is
named first, not the later arithmetic or the backward(); a cut seen on the loss itself still
leads. Real torch, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn

class Settings:
    def __init__(self, scale):
        self.scale = scale

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, t = torch.randn(4, 3), torch.linspace(0, 1, 5)
"""

BUGS = {
    # the number goes into a plain object; the loss is computed from it with fresh tensors
    "number_kept_in_an_object": """
for _ in range(2):
    opt.zero_grad()
    cfg = Settings(scale=model(x).mean().item())  # C
    loss = ((1.0 - cfg.scale * t) ** 2).mean()
    loss.backward()
    opt.step()
""",
    # a REINFORCE-style sum of numbers: backward() is called on a float
    "loss_summed_from_numbers": """
def episode():
    total = 0
    for r in (1.0, 0.5, 0.25):
        logp = torch.log_softmax(model(x).t(), dim=1)[0, 1]
        total -= logp.item() * r  # C
    total = total / 3
    total.backward()

episode()
""",
}

LOOKALIKES = {
    "loss_logged_before_backward": """
for _ in range(2):
    opt.zero_grad()
    loss = (model(x) ** 2).mean()
    print(loss.item(), model(x).max().item())
    loss.backward()
    opt.step()
""",
}


def _line(src):
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_item_line_named_first(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.code != 0 and res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT101", _line(src)), \
        res.findings


def test_cut_on_the_loss_still_leads(run_script):
    """An .item() in the step does not take the place of the detach the loss was cut by."""
    src = (HEAD + """
for _ in range(2):
    opt.zero_grad()
    peak = model(x).max().item()
    pred = model(x).detach()  # C
    loss = ((pred - peak) ** 2).mean()
    loss.backward()
""").lstrip("\n")
    res = run_script(src)
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT107", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.findings


def test_enable_grad_inside_inference_mode_names_the_block(run_script):
    """enable_grad() cannot undo inference_mode() entered by a caller: the caller's `with` is
    named, not the op or the autograd.grad call."""
    src = """
import torch
import torch.nn as nn

class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def jacobian_rows(self, batch):
        with torch.enable_grad():
            x = batch.clone().requires_grad_(True)
            y = self.lin(x)
            return torch.autograd.grad(y.sum(), x)[0]

def evaluate(model, batches):
    with torch.{ctx}():  # C
        return [model.jacobian_rows(b) for b in batches]

print(len(evaluate(Probe(), [torch.randn(2, 3)])))
"""
    bug = src.replace("{ctx}", "inference_mode").lstrip("\n")
    res = run_script(bug)
    assert res.code != 0 and (res.findings[0]["code"], res.findings[0]["line"]) == (
        "GT204", _line(bug)), res.findings
    ok = run_script(src.replace("{ctx}", "no_grad").lstrip("\n"), name="ok.py")
    assert ok.code == 0 and ok.findings == [], ok.findings


def test_static_forward_function_is_silent(run_script):
    """The look-alike of the legacy Function (catalogue repro): static methods and .apply()."""
    res = run_script("""
import torch

class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return -g

x = torch.randn(3, requires_grad=True)
Reverse.apply(x).sum().backward()
""")
    assert res.code == 0 and res.findings == [], res.findings
