"""Session-26 run-time diagnoses of crashes (docs/triage/runtime26b.md):

- NOTE [helper that owns the leaf] (runtime/trace/root_sites.py): an in-place write on a leaf
  that requires grad, inside a helper that itself changes that argument's autograd state
  (``detach_()``, ``requires_grad = False``), is said at the write, not at the caller;
- NOTE [handed to a library] (runtime/trace/diagnose_kept.py): a tensor that requires grad
  converted to numpy inside a library the user's line called (matplotlib) is said at that line;
  a history-list reading needs the list to hold a tensor that requires grad;
- the tracer keeps the line that made a node when an op returns its input itself (``.cpu()``
  of a CPU tensor, ``.float()`` of a float one): the numpy reading then finds the function that
  computed the value (umwe's mapped embeddings), not the conversion's own line.

Buggy twins (code + line asserted), twins whose other line stays the cause, and silent
look-alikes. Real torch, in-process: every bug below crashes on real torch.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _first(res):
    assert res.findings, res.err
    return res.findings[0]


def _run_line(f):
    """The line the run itself named: the finding's, or (fused into a static finding that
    keeps its own line) the one of its "confirmed at run time" entry."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


# ---- a helper that fills a Parameter and then freezes it (NOTE [helper that owns the leaf]) --

OWNER_BUGS = {
    # the transformer notebook's shape: slice writes, then detach_() and requires_grad = False
    "sinusoid_then_frozen": """
def fill_sinusoids(n, dim, E):
    pos = np.arange(n)[:, None] / np.power(10000, 2 * (np.arange(dim)[None] // 2) / dim)
    E[:, 0::2] = torch.FloatTensor(np.sin(pos[:, 0::2]))  # <- cause
    E[:, 1::2] = torch.FloatTensor(np.cos(pos[:, 1::2]))
    E.detach_()
    E.requires_grad = False


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(20, 8)
        self.pos = nn.Embedding(10, 8)
        fill_sinusoids(10, 8, self.pos.weight)

    def forward(self, ids):
        return self.tok(ids) + self.pos(torch.arange(ids.size(1)))


emb = Embed()
head = nn.Linear(8, 2)
opt = torch.optim.Adam([p for p in [*emb.parameters(), *head.parameters()] if p.requires_grad])
loss = F.cross_entropy(head(emb(torch.randint(0, 20, (4, 6))).mean(1)), torch.tensor([0, 1, 0, 1]))
loss.backward()
opt.step()
""",
    # a variant the cases do not show: a method, copy_() of a table, then requires_grad_(False)
    "method_copies_table_then_freezes": """
class Tagger(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.lookup = nn.Embedding(*table.shape)
        self._load_frozen(self.lookup.weight, table)
        self.out = nn.Linear(table.shape[1], 3)

    def _load_frozen(self, w, table):
        w.copy_(table)  # <- cause
        w.requires_grad_(False)

    def forward(self, ids):
        return self.out(self.lookup(ids).mean(1))


model = Tagger(torch.randn(30, 6))
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
loss = F.cross_entropy(model(torch.randint(0, 30, (4, 5))), torch.tensor([0, 1, 2, 0]))
loss.backward()
opt.step()
""",
}

# a generic initialiser that does not touch the argument's autograd state: the caller that
# handed it a Parameter with grad mode on stays the cause (e2cnn's shape)
CALLER_BUGS = {
    "generic_init_helper": """
def scaled_init(t, fan):
    t[:] = torch.randn_like(t) / fan ** 0.5


conv = nn.Conv2d(2, 4, 3)
scaled_init(conv.weight, 18)  # <- cause
opt = torch.optim.SGD(conv.parameters(), lr=0.1)
conv(torch.randn(1, 2, 6, 6)).mean().backward()
opt.step()
""",
}

OWNER_LOOKALIKES = {
    # the same helper with the writes under no_grad (the fixed notebook)
    "sinusoid_under_no_grad": """
def fill_sinusoids(n, dim, E):
    pos = np.arange(n)[:, None] / np.power(10000, 2 * (np.arange(dim)[None] // 2) / dim)
    with torch.no_grad():
        E[:, 0::2] = torch.FloatTensor(np.sin(pos[:, 0::2]))
        E[:, 1::2] = torch.FloatTensor(np.cos(pos[:, 1::2]))
    E.detach_()
    E.requires_grad = False


pos = nn.Embedding(10, 8)
fill_sinusoids(10, 8, pos.weight)
head = nn.Linear(8, 2)
opt = torch.optim.Adam(head.parameters())
loss = F.cross_entropy(head(pos(torch.arange(4))), torch.tensor([0, 1, 0, 1]))
loss.backward()
opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(OWNER_BUGS))
def test_helper_that_freezes_its_argument_keeps_the_write(run_script, name):
    src = HEAD + OWNER_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: in-place write on a leaf that requires grad
    f = _first(res)
    assert f["code"] == "GT302", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(CALLER_BUGS))
def test_generic_initialiser_names_its_caller(run_script, name):
    src = HEAD + CALLER_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err
    f = _first(res)
    assert f["code"] == "GT302", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(OWNER_LOOKALIKES))
def test_helper_writing_under_no_grad_is_silent(run_script, name):
    res = run_script(HEAD + OWNER_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# ---- a tensor on its graph handed to a plotting library (NOTE [handed to a library]) --------

PLOT_HEAD = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
"""

LIBRARY_BUGS = {
    # fastai's lesson: the fitted line drawn from the trained parameter (no detach)
    "scatter_of_parameter_product": """
x = torch.rand(20, 2)
a = nn.Parameter(torch.tensor([-1.0, 1.0]))
y = x @ torch.tensor([3.0, 2.0])
for _ in range(5):
    loss = ((x @ a - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        a -= 0.1 * a.grad
        a.grad.zero_()
plt.scatter(x[:, 0], x @ a)  # <- cause
plt.savefig("fit.png")
""",
    # a variant the cases do not show: a band drawn inside the user's own plotting helper, the
    # values computed in another helper (which is not where the fix goes)
    "band_from_helper_values": """
def predict_band(model, xs):
    mu = model(xs).squeeze(1)
    return mu - 1.0, mu + 1.0


def show(ax, xs, lo, hi):
    ax.fill_between(xs.squeeze(1), lo, hi, alpha=0.3)  # <- cause


model = nn.Linear(1, 1)
xs = torch.linspace(0, 1, 10)[:, None]
fig, ax = plt.subplots()
lo, hi = predict_band(model, xs)
show(ax, xs, lo, hi)
fig.savefig("band.png")
""",
    # cheetah's shape: the call's first argument is a list of floats (not where the tensor was
    # kept); the tensors come in a comprehension on the same line
    "plot_of_float_axis_and_tensor_rows": """
def track(x, k):
    rows, s, axis = [], 0.0, []
    for _ in range(3):
        x = x * k
        s += 0.5
        rows.append(x[:, 0])
        axis.append(s)
    return x, axis, rows


k = torch.tensor(1.5, requires_grad=True)
out, axis, rows = track(torch.ones(2, 2), k)
out.sum().backward()
fig, ax = plt.subplots()
for i in range(2):
    ax.plot(axis, [r[i] for r in rows])  # <- cause
fig.savefig("track.png")
""",
}

# numpy's own functions on an evaluation helper's returned loss: the helper that returned it
# with its graph stays the cause (fedgen's shape)
NUMPY_OWN_BUGS = {
    "np_sum_of_returned_losses": """
class Client:
    def __init__(self):
        self.model = nn.Linear(4, 3)
        self.data = (torch.randn(5, 4), torch.randint(0, 3, (5,)))

    def evaluate(self):
        x, y = self.data
        return F.cross_entropy(self.model(x), y), len(y)  # <- cause


stats = [Client().evaluate() for _ in range(3)]
total = np.sum([loss * n for loss, n in stats]) / np.sum([n for _, n in stats])
print(total)
""",
}

LIBRARY_LOOKALIKES = {
    "scatter_of_detached_product": """
x = torch.rand(20, 2)
a = nn.Parameter(torch.tensor([-1.0, 1.0]))
y = x @ torch.tensor([3.0, 2.0])
for _ in range(5):
    loss = ((x @ a - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        a -= 0.1 * a.grad
        a.grad.zero_()
plt.scatter(x[:, 0], (x @ a).detach())
plt.savefig("fit.png")
""",
    "band_under_no_grad": """
model = nn.Linear(1, 1)
xs = torch.linspace(0, 1, 10)[:, None]
fig, ax = plt.subplots()
with torch.no_grad():
    mu = model(xs).squeeze(1)
ax.fill_between(xs.squeeze(1), mu - 1.0, mu + 1.0, alpha=0.3)
fig.savefig("band.png")
""",
}


@pytest.mark.parametrize("name", sorted(LIBRARY_BUGS))
def test_tensor_handed_to_a_plotting_library_names_the_call(run_script, name):
    src = HEAD + PLOT_HEAD + LIBRARY_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch + matplotlib: "Can't call numpy() on Tensor..."
    f = _run_finding(res)
    assert f["code"] == "GT807", res.err
    assert f["line"] == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(NUMPY_OWN_BUGS))
def test_numpy_function_on_returned_loss_keeps_the_helper(run_script, name):
    src = HEAD + NUMPY_OWN_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err
    f = _run_finding(res)
    assert f["code"] == "GT807", res.err
    assert f["line"] == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(LIBRARY_LOOKALIKES))
def test_detached_values_handed_to_a_plotting_library_are_silent(run_script, name):
    res = run_script(HEAD + PLOT_HEAD + LIBRARY_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# ---- an identity op does not take over the line that made the node --------------------------

IDENTITY_BUGS = {
    # umwe's shape: one mapped table detached (.data), its sibling not; a helper converts both
    "mapped_table_without_data": """
def accuracy(src, tgt):
    src = src.cpu().numpy()
    tgt = tgt.cpu().numpy()
    return float(((src @ tgt.T).argmax(1) == np.arange(len(src))).mean())


class Evaluator:
    def __init__(self):
        self.maps = {k: nn.Linear(4, 4, bias=False) for k in ("de", "en")}
        self.embs = {k: torch.randn(6, 4) for k in ("de", "en")}

    def run(self):
        src = self.maps["de"](self.embs["de"]).data
        tgt = self.maps["en"](self.embs["en"])  # <- cause
        return accuracy(src, tgt)


print(Evaluator().run())
""",
    # a variant the cases do not show: .float() of a float tensor, then np.asarray in the helper
    "float_of_float_then_asarray": """
def to_array(values):
    return np.asarray(values.float().numpy())


def scores(model, xs):
    probs = model(xs).softmax(-1)  # <- cause
    return to_array(probs)


print(scores(nn.Linear(3, 2), torch.randn(4, 3)).shape)
""",
}

IDENTITY_LOOKALIKES = {
    "mapped_tables_both_detached": """
def accuracy(src, tgt):
    src = src.cpu().numpy()
    tgt = tgt.cpu().numpy()
    return float(((src @ tgt.T).argmax(1) == np.arange(len(src))).mean())


maps = {k: nn.Linear(4, 4, bias=False) for k in ("de", "en")}
embs = {k: torch.randn(6, 4) for k in ("de", "en")}
print(accuracy(maps["de"](embs["de"]).data, maps["en"](embs["en"]).detach()))
""",
}


@pytest.mark.parametrize("name", sorted(IDENTITY_BUGS))
def test_identity_op_keeps_the_line_that_made_the_value(run_script, name):
    src = HEAD + IDENTITY_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: "Can't call numpy() on Tensor that requires grad"
    f = _run_finding(res)
    assert f["code"] == "GT807", res.err
    assert f["line"] == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(IDENTITY_LOOKALIKES))
def test_detached_tables_converted_are_silent(run_script, name):
    res = run_script(HEAD + IDENTITY_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err
