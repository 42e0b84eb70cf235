"""Session-29 run-time diagnoses of silent bugs (docs/triage/runtime29a.md):

- a loss term computed by ops from a ``.detach()`` result, summed into a live loss, is named at
  the detach (NOTE [term computed from a detached tensor]);
- ``torch.tensor([torch.tensor([...]).mean(), ...])``: the statement's outer copy is named, and
  a sum reached only by a later ``autograd.grad`` still counts (NOTE [rewrapped loss term],
  NOTE [dead sum reached by a later backward]).

Buggy twins (code + line asserted), silent look-alikes, and a variant each case does not show.
"""
from __future__ import annotations

from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _run_findings(res, code="GT844"):
    return [f for f in res.findings if f["source"] != "static" and f["code"] == code]


def _run_line(f):
    """The line the run itself named (fused: its "confirmed at run time" entry)."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _check(run_script, src, code="GT844"):
    res = run_script(src)
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    assert (found[0]["code"], _run_line(found[0])) == (code, marked_line(src)), res.err


# -- a term computed from a detached tensor, summed into the loss ------------------------------
# deep_cage's shape: a helper detaches weights it returns, a regularizer on them joins the loss
DETACHED_TERM_TWIN = HEAD + """
def soft_assign(x, centers):
    w = torch.softmax(-torch.cdist(x, centers), dim=-1)
    w = w.detach()  # <- cause
    return w @ centers + 0.5 * x, w


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(3, 3)
        self.centers = nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        return soft_assign(self.enc(x), self.centers)


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 3), torch.randn(16, 3)
    out, w = net(x)
    losses = {"fit": F.mse_loss(out, y), "entropy": -(w * (w + 1e-8).log()).sum(-1).mean() * 0.1}
    total = sum(losses.values())
    opt.zero_grad()
    total.backward()
    opt.step()
"""


def test_term_computed_from_a_detached_tensor(run_script):
    _check(run_script, DETACHED_TERM_TWIN)


# a variant the case does not show: several tensors detached at once through map() in a module,
# an auxiliary loss from them added onto a running total that starts as a leaf, no optimizer
DETACHED_TERM_VARIANT = HEAD + """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.compress = nn.Linear(4, 4)

    def forward(self, x):
        k, c = self.proj(x), self.compress(x)
        k, c = map(torch.detach, (k, c))  # <- cause
        return F.mse_loss(c, k)


block = Block()
aux = torch.zeros((), requires_grad=True)
aux = aux + block(torch.randn(8, 4))
aux.backward()
"""


def test_term_computed_from_detached_tensors_onto_a_leaf_total(run_script):
    _check(run_script, DETACHED_TERM_VARIANT)


# look-alike: DiCE / a scalar straight-through: the detach result itself in the sum
DETACHED_STRAIGHT_THROUGH = HEAD + """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    logp = model(torch.randn(8, 4)).sum()
    magic = torch.exp(logp - logp.detach())
    surrogate = (magic * torch.randn(())).mean()
    value = surrogate + (surrogate.round() - surrogate).detach()
    opt.zero_grad()
    value.backward()
    opt.step()
"""


def test_detach_result_itself_in_a_sum_is_silent(run_script):
    res = run_script(DETACHED_STRAIGHT_THROUGH)
    assert _run_findings(res) == [], res.err


# look-alike: a metric computed from detached predictions, summed with the loss for the logs
# only (the backward() runs on the live loss), and a detached baseline inside a live term
DETACHED_METRIC_LOGGED = HEAD + """
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    acc = (logits.detach().argmax(1) == y).float().mean()
    baseline = logits.detach().mean()
    loss = loss + ((logits.mean() - baseline) ** 2)
    shown = loss + acc
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(round(shown.item(), 3))
"""


def test_metric_from_detached_predictions_for_the_logs_is_silent(run_script):
    res = run_script(DETACHED_METRIC_LOGGED)
    assert _run_findings(res) == [], res.err


# -- torch.tensor of torch.tensor copies, the total differentiated by autograd.grad ------------
NESTED_REWRAP_TWIN = HEAD + """
net = nn.Linear(6, 4)
x, ref = torch.randn(3, 6), torch.randn(3, 4)
out = net(x)
first = (out - ref).abs().mean()
per_row = torch.tensor(  # <- cause
    [torch.tensor([(out[i, j] - ref[i, j]).abs() for j in range(2)]).mean() for i in range(3)]
)
second = per_row.mean()
total = first + second
share = torch.autograd.grad(first, net.weight, retain_graph=True)[0]
full = torch.autograd.grad(total, net.weight)[0]
print((full - share).norm().item())
"""


def test_nested_rewrap_named_at_the_outer_copy(run_script):
    _check(run_script, NESTED_REWRAP_TWIN)


# look-alike: per-row values copied with torch.tensor for a report, the loss built with stack
NESTED_REWRAP_REPORT = HEAD + """
net = nn.Linear(6, 4)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, ref = torch.randn(3, 6), torch.randn(3, 4)
out = net(x)
rows = [(out[i] - ref[i]).abs().mean() for i in range(3)]
report = torch.tensor([torch.tensor([r]).mean() for r in rows])
loss = torch.stack(rows).mean()
opt.zero_grad()
loss.backward()
opt.step()
print(report.tolist(), (loss + report.mean()).item())
"""


def test_nested_rewrap_for_a_report_is_silent(run_script):
    res = run_script(NESTED_REWRAP_REPORT)
    assert _run_findings(res) == [], res.err


# -- a loss warned about broadcasting: the squeezed side's line --------------------------------
# FARM's shape: a helper squeezes the logits to (B,), the labels stay (B, 1)
SQUEEZED_TWIN = HEAD + """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Linear(8, 1)
        self.loss_fct = nn.MSELoss(reduction="none")

    def forward(self, x):
        return self.ff(x)

    def to_preds(self, logits):
        return logits.squeeze(-1)

    def to_loss(self, logits, labels):
        return self.loss_fct(logits, labels.float())


head = Head()
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 8)
    labels = x.sum(1, keepdim=True)
    logits = head(x)
    preds = head.to_preds(logits)  # <- cause
    loss = head.to_loss(preds, labels).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_broadcast_loss_named_where_the_helper_squeezed_input_was_bound(run_script):
    _check(run_script, SQUEEZED_TWIN, "GT842")


# a variant the case does not show: squeezed in the training function itself, a line before
SQUEEZED_VARIANT = HEAD + """
def train_step(model, opt, x, y):
    out = model(x)
    pred = out.squeeze(1)  # <- cause
    loss = F.l1_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()


model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    train_step(model, opt, torch.randn(8, 4), torch.randn(8, 1))
"""


def test_broadcast_loss_named_at_the_squeeze_in_the_running_frame(run_script):
    _check(run_script, SQUEEZED_VARIANT, "GT842")


# look-alike: both sides squeezed to (B,): no broadcast, nothing to say
SQUEEZED_BOTH = HEAD + """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    pred = model(x).squeeze(1)
    loss = F.mse_loss(pred, y.squeeze(1))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_both_sides_squeezed_is_silent(run_script):
    res = run_script(SQUEEZED_BOTH)
    assert _run_findings(res, "GT842") == [], res.err
