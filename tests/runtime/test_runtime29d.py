"""Session-29 (second round) run-time diagnosis of a silent bug (docs/triage/runtime29d.md):

- a loss term computed in NumPy from a ``.detach()`` result's ``.numpy()`` and added to a live
  loss is a dead loss term, named at the detach (NOTE [loss term computed in NumPy]); a static
  finding that quotes an error the run never raised does not lead over it
  (NOTE [predicted error that never came]).

Buggy twin (code + line asserted), silent look-alikes, and a variant the case does not show.
"""
from __future__ import annotations

from rt_helpers import marked_line

HEAD = """
import numpy as np
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


# scl's shape: a contrastive term computed in NumPy on the detached hidden state, weighted into
# the loss with the live cross-entropy
NUMPY_TERM_TWIN = HEAD + """
def spread(emb):
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = np.exp(emb @ emb.T)
    return float(np.log(sim.sum(1)).mean()) * np.float64(1.0)


enc = nn.Linear(6, 4)
head = nn.Linear(4, 2)
opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    h = torch.tanh(enc(x))
    ce = F.cross_entropy(head(h), y)
    term = spread(h.cpu().detach().numpy())  # <- cause
    loss = 0.5 * np.float64(term) + 0.5 * ce
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_numpy_term_from_detached_hidden_state(run_script):
    _check(run_script, NUMPY_TERM_TWIN)


# a variant the case does not show: the NumPy term is subtracted from the loss, computed in a
# module's forward from a detached copy, and no optimizer steps (one backward())
NUMPY_TERM_VARIANT = HEAD + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        z = self.fc(x)
        arr = z.detach().numpy()  # <- cause
        bonus = np.mean(np.abs(arr)).astype(np.float32)
        return z, bonus


net = Net()
z, bonus = net(torch.randn(4, 5))
loss = z.pow(2).mean() - bonus
loss.backward()
"""


def test_numpy_term_subtracted_in_module(run_script):
    _check(run_script, NUMPY_TERM_VARIANT)


# look-alike: predictions logged through NumPy after the step, and a NumPy constant (a Gaussian
# NLL's normaliser) added to the next step's loss: the constant is not made from the logged
# array (the next loss's graph is built after the .numpy())
NUMPY_LOGGED_AFTER_STEP = HEAD + """
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    mu = model(x)
    nll = 0.5 * ((mu - y) ** 2).sum(1).mean() + 0.5 * np.log(2 * np.pi)
    opt.zero_grad()
    nll.backward()
    opt.step()
    shown = np.abs(mu.detach().cpu().numpy()).mean()
"""


def test_numpy_logging_after_step_and_numpy_constant_is_silent(run_script):
    res = run_script(NUMPY_LOGGED_AFTER_STEP)
    assert _run_findings(res) == [], res.err


# look-alike: the NumPy term is computed from the live tensor's values but only logged; the
# loss backpropagated is the live one
NUMPY_METRIC_NOT_IN_LOSS = HEAD + """
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    acc = (logits.detach().numpy().argmax(1) == y.numpy()).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(round(loss.item() + acc, 3))
"""


def test_numpy_metric_outside_the_loss_is_silent(run_script):
    res = run_script(NUMPY_METRIC_NOT_IN_LOSS)
    assert _run_findings(res) == [], res.err
