"""Session 38 (docs/triage/runtime38.md): `gradtrace run` names the root line first. Each buggy
twin is named on its line and its look-alike is silent (or named elsewhere). Real torch,
in-process, a few steps of tiny models."""
from __future__ import annotations

from rt_helpers import marked_line

HEAD = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""

# NOTE [detach result dropped]: a metrics hook "detaches" the kept outputs with a bare call
DROPPED_DETACH = HEAD + """
def keep(t):
    t.detach()  # <- root
    return t


model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []
for _ in range(3):
    out = model(torch.randn(8, 4))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    kept.append(keep(out.softmax(-1)[:, 1]))
print(np.concatenate(kept).mean())  # <- crash
"""
ASSIGNED = DROPPED_DETACH.replace("    t.detach()  # <- root\n", "    t = t.detach()\n")
# the tensor itself converted with .numpy() (the tracer sees the call)
DIRECT = DROPPED_DETACH.replace("np.concatenate(kept).mean()", "kept[-1].numpy().mean()")
# the detached copy kept under another name: that detach did its job, the original converted
# later is another matter (not the detach line)
KEPT_COPY = DROPPED_DETACH.replace("    t.detach()  # <- root\n", "    t.copy = t.detach()\n")


def _first(res):
    live = [f for f in res.findings if f["source"] != "static"]
    return live[0] if live else None


def test_numpy_of_a_tensor_whose_detach_was_dropped_names_the_detach(run_script):
    for src in (DROPPED_DETACH, DIRECT):
        res = run_script(src)
        assert res.code != 0
        first = _first(res)
        assert first and (first["code"], first["line"]) == (
            "GT807", marked_line(src, "# <- root")), res.findings
        assert any(r["line"] == marked_line(src, "# <- crash") for r in first["related"])


def test_detach_assigned_is_silent(run_script):
    assert ASSIGNED != DROPPED_DETACH
    res = run_script(ASSIGNED)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["source"] != "static"], res.findings


def test_detach_kept_elsewhere_is_not_named(run_script):
    assert KEPT_COPY != DROPPED_DETACH
    res = run_script(KEPT_COPY)
    assert res.code != 0
    first = _first(res)
    assert first and first["code"] == "GT807" and first["line"] != marked_line(
        DROPPED_DETACH, "# <- root"), res.findings


# NOTE [numpy of a running total]: the epoch's total keeps the graph; its mean is plotted
RUNNING_TOTAL = HEAD + """
def train_step(model, opt, batches):
    total = 0
    for x, y in batches:
        loss = F.mse_loss(model(x), y)
        total += loss  # <- root
        opt.zero_grad()
        loss.backward()
        opt.step()
    return total / len(batches)


model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
history = []
for epoch in range(2):
    history.append(train_step(model, opt, batches))  # <- list
print(np.array(history))
"""
# np.concatenate over the history: each item converted in turn
TOTAL_CONCATENATED = RUNNING_TOTAL.replace(
    "print(np.array(history))", "print(np.concatenate(history))").replace(
    "return total / len(batches)", "return (total / len(batches)).reshape(1)")
RUNNING_NUMBER = RUNNING_TOTAL.replace("total += loss  # <- root", "total += loss.item()")
# the last loss itself is kept for the plot, beside the running total (not made from it)
LOSS_KEPT = RUNNING_TOTAL.replace("    return total / len(batches)\n",
                                  "    return loss\n")


def test_numpy_of_a_running_totals_value_names_the_total(run_script):
    for src in (RUNNING_TOTAL, TOTAL_CONCATENATED):
        res = run_script(src)
        assert res.code != 0
        first = _first(res)
        assert first and (first["code"], first["line"]) == (
            "GT807", marked_line(src, "# <- root")), res.findings
    assert any(r["line"] == marked_line(RUNNING_TOTAL, "# <- list") for r in first["related"])


def test_running_total_of_numbers_is_silent(run_script):
    assert RUNNING_NUMBER != RUNNING_TOTAL
    res = run_script(RUNNING_NUMBER)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["source"] != "static"], res.findings


def test_loss_kept_beside_a_running_total_names_the_list(run_script):
    assert LOSS_KEPT != RUNNING_TOTAL
    res = run_script(LOSS_KEPT)
    assert res.code != 0
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT807", marked_line(LOSS_KEPT, "# <- list")), res.findings


# NOTE [gradient blown up]: class prototypes initialised at zero and normalised
BLOWN_UP = HEAD + """
feat = nn.Linear(6, 4)
protos = nn.Parameter(torch.zeros(3, 4))
opt = torch.optim.SGD(list(feat.parameters()) + [protos], lr=0.1)
for _ in range(2):
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    logits = F.normalize(feat(x), dim=1) @ F.normalize(protos, dim=1).t()  # <- root
    loss = F.cross_entropy(logits * 10, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
PROTOS_RANDOM = BLOWN_UP.replace("torch.zeros(3, 4)", "torch.randn(3, 4)")
# a loss scaled up by a large constant (as a GradScaler does) grows every gradient alike
SCALED = PROTOS_RANDOM.replace("    loss.backward()\n", "    (loss * 2.0 ** 24).backward()\n")
# a loss weighted by a huge number: the program's own weight, not an op at a bad input
WEIGHTED = PROTOS_RANDOM.replace("    loss.backward()\n", "    (loss * 1e9).backward()\n")


def test_gradient_blown_up_by_a_normalised_zero_vector_names_the_op(run_script):
    res = run_script(BLOWN_UP)
    assert res.code == 0, res.err
    first = _first(res)
    assert first and (first["code"], first["line"]) == (
        "GT893", marked_line(BLOWN_UP, "# <- root")), res.findings


def test_normalised_random_prototypes_and_a_scaled_loss_are_silent(run_script):
    for src in (PROTOS_RANDOM, SCALED, WEIGHTED):
        assert src != BLOWN_UP
        res = run_script(src)
        assert res.code == 0, res.err
        assert not [f for f in res.findings if f["code"] == "GT893"], res.findings
