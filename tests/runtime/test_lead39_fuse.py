"""Lead, session 39: the static findings that explain two runtime symptoms lead them
(runtime/fuse_tables.py). A NaN gradient (GT825) made by a standardisation over a bare std that
is 0 is named at the standardisation (GT776), not where the NaN was first seen; parameters that
get gradients and no update (GT821) because a name filter took a used layer out of the
optimizer are named at the filter (GT560). The look-alikes (std + eps, a filter of a layer the
model does not run) are silent."""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

torch = pytest.importorskip("torch")

NAN = """
import torch
import torch.nn as nn
torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
for _ in range(2):
    obs = torch.randn(6, 4)
    returns = torch.ones(6)
    adv = (returns - returns.mean()) / (returns.std(){EPS})  # <- cause
    logp = torch.log_softmax(policy(obs), -1)[:, 0]
    loss = -(logp * adv).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

FILTER = """
import torch
import torch.nn as nn
torch.manual_seed(0)
class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 8)
        self.pool = nn.Linear(8, 8)
    def forward(self, x):
        h = torch.tanh(self.enc(x))
        return h, self.pool(h)
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Body()
        self.out = nn.Linear(8, 1)
    def forward(self, x):
        seq, pooled = self.body(x)
        return self.out({USED})
model = Head()
named = [n for n in model.named_parameters() if "pool" not in n[0]]  # <- cause
opt = torch.optim.SGD([p for _, p in named], lr=0.1)
for _ in range(2):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _first(res):
    assert res.findings, res.err
    return res.findings[0]


def test_bare_std_leads_the_nan_gradient(run_script):
    src = NAN.replace("{EPS}", "")
    f = _first(run_script(src))  # one line, two views: the run's words lead, GT776 related
    assert f["code"] in ("GT776", "GT825") and f["line"] == marked_line(src)
    assert f["code"] == "GT776" or any("(GT776)" in r["message"] for r in f["related"])


def test_std_with_eps_is_silent(run_script):
    res = run_script(NAN.replace("{EPS}", " + 1e-8"))
    assert res.code == 0 and res.findings == [], res.err


def test_name_filter_of_a_used_layer_leads_the_unoptimized_gradients(run_script):
    src = FILTER.replace("{USED}", "pooled")
    f = _first(run_script(src))
    assert (f["code"], f["line"]) == ("GT560", marked_line(src))


def test_name_filter_of_a_layer_whose_output_is_dropped_is_silent(run_script):
    res = run_script(FILTER.replace("{USED}", "seq"))
    assert [f["code"] for f in res.findings if f["code"] in ("GT560", "GT821")] == [], res.err


SCRIPTED = """
import torch
import torch.nn as nn


@torch.jit.script
def gate_fwd(x):
    return x.{OP}(torch.sigmoid(x))  # <- cause


class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return gate_fwd(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * s * (1 + x * (1 - s))


torch.manual_seed(0)
lin = nn.Linear(4, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(2):
    loss = Gate.apply(lin(torch.randn(3, 4))).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_static_finding_in_a_scripted_helper_counts_as_run(run_script):
    """NOTE [scripted bodies ran with their def]: TorchScript runs the body outside Python."""
    src = SCRIPTED.replace("{OP}", "mul_")
    f = _first(run_script(src))
    assert (f["code"], f["line"]) == ("GT730", marked_line(src))


def test_scripted_helper_out_of_place_is_silent(run_script):
    res = run_script(SCRIPTED.replace("{OP}", "mul"))
    assert res.code == 0 and res.findings == [], res.err
