"""A softmax over a dimension of size one (GT762 static, GT877 at run time; issue 13, held-out
10's catalyst, KEQA and SwiftFormer). Each bug is a spelling the real-world cases do not use;
torch is the oracle (every weight 1.0 or, for log_softmax, 0.0; the scorer's gradient exactly
zero), the checker names the line marked ``# S``, and the run names it first. Each look-alike
is correct code next to a size-one dimension: the checker and the run stay silent and the
scorer does get a gradient."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
h = torch.randn(4, 5, 6)
"""

# each program leaves `w` (the weights) and `scorer` (the tensor that should train) behind
BUGS = {
    # a keepdim reduction gives [B, T, 1]; torch.softmax with a positional dim
    "keepdim_reduction_torch_softmax": """
class Pool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q = nn.Parameter(torch.randn(d))

    def forward(self, h):
        s = (h * self.q).sum(-1, keepdim=True)
        w = torch.softmax(s, -1)  # S
        return (w * h).sum(1), w

pool = Pool(6)
out, w = pool(h)
out.pow(2).sum().backward()
scorer = pool.q
""",
    # Linear(d, 1) on a 2-D view, log_softmax over dim 1 of the [B*T, 1] result
    "linear_on_view_log_softmax_dim1": """
score = nn.Linear(6, 1)
flat = h.view(-1, 6)
w = F.log_softmax(score(flat), dim=1)  # S
(w.exp() * flat).sum().backward()
scorer = score.weight
""",
    # an nn.Softmax under a name that says nothing, after a Linear(d, 1) attribute
    "softmax_module_named_norm": """
class Attn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 1)
        self.norm = nn.Softmax(dim=-1)  # S

    def forward(self, h):
        w = self.norm(self.score(h))
        return (w * h).sum(1), w

attn = Attn(6)
out, w = attn(h)
out.pow(2).sum().backward()
scorer = attn.score.weight
""",
    # matmul with a (d, 1) parameter, the functional softmax through a scaled name
    "matmul_column_parameter": """
class Additive(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.v = nn.Parameter(torch.randn(d, 1))
        self.scale = d ** -0.5

    def forward(self, h):
        e = torch.matmul(torch.tanh(h), self.v) * self.scale
        w = F.softmax(e, dim=-1)  # S
        return (w * h).sum(1), w

add = Additive(6)
out, w = add(h)
out.pow(2).sum().backward()
scorer = add.v
""",
    # Sequential ending in Linear(d, 1) then nn.Softmax over its last dim, built in place
    "sequential_linear_then_softmax": """
net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1), nn.Softmax(dim=-1))  # S
w = net(h)
(w * h).sum().backward()
scorer = net[2].weight
""",
    # Conv2d(c, 1) on a 4-D view, softmax over the channel dim 1 (the method form)
    "conv2d_one_channel_method_softmax": """
conv = nn.Conv2d(3, 1, kernel_size=1)
x = h.reshape(4, 3, 2, 5)
w = conv(x).softmax(dim=1)  # S
(w * x).sum().backward()
scorer = conv.weight
""",
    # unsqueeze(1) of per-position scores: [B, 1, T], softmax over dim 1
    "unsqueezed_scores_dim1": """
score = nn.Linear(6, 1)
s = score(h).squeeze(-1)
w = s.unsqueeze(1).softmax(1)  # S
(w * h[:, :, 0].unsqueeze(1)).sum().backward()
scorer = score.weight
""",
}

LOOKALIKES = {
    # the per-position scores normalised over the positions (dim 1 of [B, T, 1])
    "linear_scores_over_positions": """
score = nn.Linear(6, 1)
w = F.softmax(score(h), dim=1)
(w * h).sum().pow(2).backward()
scorer = score.weight
""",
    # one score per entry through a sigmoid
    "linear_one_then_sigmoid": """
score = nn.Linear(6, 1)
w = torch.sigmoid(score(h))
(w * h).sum().backward()
scorer = score.weight
""",
    # the size-one dim squeezed away before the softmax
    "squeezed_before_softmax": """
score = nn.Linear(6, 1)
w = score(h).squeeze(-1).softmax(-1)
(w.unsqueeze(-1) * h).sum().pow(2).backward()
scorer = score.weight
""",
    # a Conv1d's [B, 1, T] output transposed to [B, T, 1]: dim 1 is the T positions
    "conv1d_transposed_softmax_dim1": """
conv = nn.Conv1d(6, 1, kernel_size=1)
x = h.transpose(1, 2)
w = conv(x).transpose(1, 2).softmax(dim=1)
(w * h).sum().pow(2).backward()
scorer = conv.weight
""",
    # [B, T, 1] scores plus a [B, T, T] mask: broadcasting stretches the last dim to T
    "scores_broadcast_with_mask": """
score = nn.Linear(6, 1)
mask = torch.zeros(4, 5, 5)
w = (score(h) + mask).softmax(-1)
(w @ h).sum().pow(2).backward()
scorer = score.weight
""",
    # a keepdim reduction over another dim than the softmax's
    "keepdim_other_dim": """
q = torch.randn(6, requires_grad=True)
s = (h * q).sum(1, keepdim=True)
w = torch.softmax(s, dim=-1)
(w * h).sum().pow(2).backward()
scorer = q
""",
}


def _line(src: str, mark: str = "# S") -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(mark))


def _src(body: str) -> str:
    return (HEAD + body).lstrip("\n")


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_is_real_on_torch(name):
    """The oracle: every weight is 1.0 (log_softmax 0.0) and the scorer's gradient is 0."""
    import torch

    ns: dict = {}
    exec(compile(_src(BUGS[name]), name, "exec"), ns)
    w, scorer = ns["w"].detach(), ns["scorer"]
    assert torch.all(w == 0.0) if "log_softmax" in BUGS[name] else torch.all(w == 1.0)
    assert scorer.grad is not None and torch.count_nonzero(scorer.grad) == 0


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_trains_on_torch(name):
    import torch

    ns: dict = {}
    exec(compile(_src(LOOKALIKES[name]), name, "exec"), ns)
    assert ns["scorer"].grad is not None and torch.count_nonzero(ns["scorer"].grad) > 0


@pytest.mark.parametrize("name", sorted(BUGS))
def test_static_names_the_softmax(name):
    from gradtrace.lint import check_source

    src = _src(BUGS[name])
    found = [(f.code, f.line) for f in check_source(src, "prog.py")
             if f.code in ("GT762", "GT763")]
    assert found == [("GT762", _line(src))]


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_static_lookalike_silent(name):
    from gradtrace.lint import check_source

    src = _src(LOOKALIKES[name])
    assert not [f for f in check_source(src, "prog.py") if f.code in ("GT762", "GT763")]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_run_names_the_softmax_first(run_script, name):
    src = _src(BUGS[name])
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"] in ("GT762", "GT877"), res.findings[0]["line"]) == \
        (True, _line(src)), res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_run_lookalike_silent(run_script, name):
    res = run_script(_src(LOOKALIKES[name]))
    assert res.code == 0 and not {"GT762", "GT877"} & set(res.codes()), res.findings


def test_run_silent_when_the_line_also_sees_more_entries(run_script):
    """A sequence of length 1 in one batch is data: the same line runs over 5 positions in
    the other batches, so nothing is reported."""
    res = run_script(_src("""
score = nn.Linear(6, 1)
opt = torch.optim.SGD(score.parameters(), lr=0.1)
for t in (5, 5, 1):
    s = score(h[:, :t]).squeeze(-1)
    w = s.softmax(dim=-1)
    opt.zero_grad()
    (w * s).sum().backward()
    opt.step()
"""))
    assert res.code == 0 and "GT877" not in res.codes(), res.findings


def test_run_names_a_line_whose_every_call_is_size_one(run_script):
    src = _src("""
score = nn.Linear(6, 1)
opt = torch.optim.SGD(score.parameters(), lr=0.1)
for _ in range(3):
    s = score(h[:, :1]).squeeze(-1)
    w = s.softmax(dim=-1)  # S
    opt.zero_grad()
    (w * h[:, 0, 0]).sum().backward()
    opt.step()
""")
    res = run_script(src)
    hit = [f for f in res.findings if f["code"] == "GT877"]
    assert [f["line"] for f in hit] == [_line(src)] and "all 3 calls" in hit[0]["message"]


def test_training_bits_unchanged(tmp_path):
    """The traced run computes the same weights as a plain run."""
    import runpy

    import torch

    from gradtrace import trace

    body = BUGS["softmax_module_named_norm"] + """
opt = torch.optim.SGD(attn.parameters(), lr=0.1)
opt.step()
"""
    path = tmp_path / "prog.py"
    path.write_text(_src(body), encoding="utf-8")
    plain = runpy.run_path(str(path))["attn"].state_dict()
    with trace():
        traced = runpy.run_path(str(path))["attn"].state_dict()
    assert all(torch.equal(plain[k], traced[k]) for k in plain)


def test_cross_entropy_over_one_logit_is_zero_on_torch():
    """GT763's oracle: cross-entropy over a class dim of size 1 is 0 with a zero gradient."""
    import torch
    import torch.nn.functional as F

    head = torch.nn.Linear(32, 1)
    loss = F.cross_entropy(head(torch.randn(8, 32)), torch.zeros(8, dtype=torch.long))
    loss.backward()
    assert loss.item() == 0.0 and torch.count_nonzero(head.weight.grad) == 0
