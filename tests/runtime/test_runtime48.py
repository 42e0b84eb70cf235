"""runtime48 on real torch, one process, a few steps, tiny models.

- NOTE [slice written back on its own line] (GT602): a rotary helper takes complex views of
  the slice it is given (``reshape``, ``view_as_complex``) and multiplies them, and the caller
  writes its result back into that slice on the same statement: backward() fails, named at
  that statement. Crash look-alike: the view taken on one line and written back on another
  (the view's line stays named). Silent: the result joined out of place with ``torch.cat``.
- NOTE [per-dimension log-probability in the loss] (GT842): a SAC critic's target built from a
  Normal policy's ``log_prob`` of a 3-dim action, never summed: the (B, 3) target broadcasts
  against the critic's (B, 1) output and torch warns at the loss; named at the ``log_prob``.
  Silent: the log-probability summed with ``keepdim`` (no warning). Look-alikes that warn: a
  target widened by noise (no ``log_prob`` on the wide path) and a summed log-probability in
  a target widened elsewhere keep the loss line; a target computed under ``no_grad`` (no graph
  to walk) keeps it too.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

ROPE = """
import torch
import torch.nn as nn
torch.manual_seed(0)


def rotate(x, freqs):
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2)


proj = nn.Linear(4, 8)
angles = nn.Parameter(torch.randn(3, 2))


def attend(h):
    freqs = torch.polar(torch.ones_like(angles), angles)
    qk = proj(h)
    q, k = qk[..., :4], qk[..., 4:]
    WRITE
    return (q * k).sum()


for step in range(2):
    loss = attend(torch.randn(2, 4, 4))
    loss.backward()
"""


def _codes(res: object) -> list[tuple[str, int]]:
    return [(f["code"], f["line"]) for f in res.findings]  # type: ignore[attr-defined]


def test_slice_written_back_on_its_own_line_is_named(run_script):
    src = ROPE.replace("WRITE", "q[:, 1:] = rotate(q[:, 1:], freqs)  # <- cause")
    res = run_script(src)
    assert res.code != 0
    assert _codes(res)[:1] == [("GT602", marked_line(src))], res.findings


def test_view_taken_on_another_line_keeps_the_view_named(run_script):
    view = "tail = torch.view_as_complex(q[:, 1:].reshape(2, 3, 2, 2))  # <- view\n"
    back = "    q[:, 1:] = torch.view_as_real(tail * freqs).flatten(-2)"
    src = ROPE.replace("WRITE", view + back)
    res = run_script(src)
    assert res.code != 0
    assert _codes(res)[:1] == [("GT602", marked_line(src, "# <- view"))], res.findings


def test_result_joined_out_of_place_is_silent(run_script):
    src = ROPE.replace("WRITE", "q = torch.cat([q[:, :1], rotate(q[:, 1:], freqs)], 1)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [c for c in _codes(res) if c[0] == "GT602"], res.findings


SAC = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal
torch.manual_seed(0)

actor = nn.Linear(4, 6)
critic = nn.Linear(7, 1)


def act(s):
    mu, std = actor(s).chunk(2, -1)
    dist = Normal(mu, F.softplus(std) + 1e-3)
    a = dist.rsample()
    logp = LOGP
    return torch.tanh(a), logp


def target(r, s2):
    a2, logp = act(s2)
    q2 = critic(torch.cat([s2, a2], 1))
    return r + 0.9 * (q2 - 0.2 * logp)EXTRA


for step in range(2):
    s, a, r, s2 = torch.randn(8, 4), torch.rand(8, 3), torch.randn(8, 1), torch.randn(8, 4)
    GUARDy = target(r, s2)
    loss = F.mse_loss(critic(torch.cat([s, a], 1)), y.detach())  # <- loss
    critic.zero_grad()
    loss.backward()
"""


def _sac(logp: str = "dist.log_prob(a)  # <- cause", extra: str = "", guard: str = "") -> str:
    return SAC.replace("LOGP", logp).replace("EXTRA", extra).replace("GUARD", guard)


def _gt842(res: object) -> list[int]:
    return [line for code, line in _codes(res) if code == "GT842"]


def test_log_prob_never_summed_named_at_the_log_prob(run_script):
    src = _sac()
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT842", marked_line(src))], res.findings


def test_log_prob_summed_is_silent(run_script):
    res = run_script(_sac("dist.log_prob(a).sum(-1, keepdim=True)"))
    assert res.code == 0, res.err
    assert _gt842(res) == [], res.findings


def test_target_widened_without_log_prob_keeps_the_loss_line(run_script):
    src = _sac("torch.zeros(8, 3)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _gt842(res) == [marked_line(src, "# <- loss")], res.findings


def test_summed_log_prob_in_a_target_widened_elsewhere_keeps_the_loss_line(run_script):
    src = _sac("dist.log_prob(a).sum(-1, keepdim=True)", extra=" + 0.1 * a2")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _gt842(res) == [marked_line(src, "# <- loss")], res.findings


def test_target_under_no_grad_keeps_the_loss_line(run_script):
    src = _sac(guard="with torch.no_grad():\n        ")
    src = src.replace("    loss = F.mse_loss", "    loss = F.mse_loss")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _gt842(res) == [marked_line(src, "# <- loss")], res.findings
