"""`gradtrace run` on the training scripts of docs/triage/unseen16.md (session 16).

augmented-neural-odes trains through torchdiffeq's adaptive solver, which computes its next
step size under `@torch.no_grad()` from the error of the last step (a value of the model's
parameters) and adds it to its running time, `t1 = t0 + dt`; the time reaches the loss through
the interpolation of the solution. That sum is the library's, not a term of the user's loss,
and the run said GT844 ('the loss term made from it has no graph'). Here a small Heun solver of
the same shape, installed in a `site-packages` folder. Twin: the user's own code adds the
solver's no-grad step size to the loss: a dead term, still reported. Real torch, in-process
runs."""
from __future__ import annotations

import sys

SOLVER = '''
import torch

@torch.no_grad()
def next_step(dt, err):
    return dt * torch.clamp(0.9 / (err + 1e-6) ** 0.5, 0.2, 5.0)

def integrate(f, y, t_end=1.0):
    t = torch.zeros(())
    dt = 0.1 / (f(y).abs().mean() + 1.0)
    while float(t) < t_end:
        k1 = f(y)
        k2 = f(y + dt * k1)
        err = (k2 - k1).abs().mean()
        y = y + 0.5 * dt * (k1 + k2)
        t = t + dt
        dt = next_step(dt, err)
    return y * (t_end / t), dt
'''

HEAD = """
import sys
sys.path.insert(0, "site-packages")
import torch
import torch.nn as nn
import heun

torch.manual_seed(0)
f = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.SGD(f.parameters(), lr=0.05)
y0 = torch.randn(16, 2)
w0 = f[0].weight.detach().clone()
"""

LIBRARY_TIME = HEAD + """
for _ in range(3):
    y, dt = heun.integrate(f, y0)
    loss = y.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
assert not torch.equal(w0, f[0].weight)
"""

USER_ADDS_STEP = HEAD + """
for _ in range(3):
    y, dt = heun.integrate(f, y0)
    loss = y.pow(2).mean()
    loss = loss + dt
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _solver(tmp_path) -> None:
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "heun.py").write_text(SOLVER.lstrip("\n"), encoding="utf-8")
    sys.modules.pop("heun", None)


def test_no_grad_step_size_summed_by_a_library_is_no_loss_term(run_script, tmp_path):
    _solver(tmp_path)
    res = run_script(LIBRARY_TIME.lstrip("\n"))
    assert res.code == 0, res.err
    assert "GT844" not in [f["code"] for f in res.findings], res.err


def test_no_grad_step_size_added_to_the_loss_by_the_user_is_reported(run_script, tmp_path):
    _solver(tmp_path)
    res = run_script(USER_ADDS_STEP.lstrip("\n"))
    assert res.code == 0, res.err
    assert "GT844" in [f["code"] for f in res.findings], res.err
