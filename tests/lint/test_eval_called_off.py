"""GT540 through a call: ``with torch.no_grad(): acc = test(model, loader)`` runs the whole of
``test`` with grad off, so ``test`` is the evaluation when it loops over batches running a
model with batch norm or dropout and nobody puts the model in eval mode. Each snippet runs on
real torch; the buggy ones move the batch-norm statistics during the evaluation."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = '''
import torch
import torch.nn as nn


def evaluate(net, batches):
    hits = 0
    for x, y in batches:
        hits += (net(x).argmax(1) == y).sum().item()
    return hits


def main():
    net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
    for x, y in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    before = net[1].running_mean.clone()
    {switch}
    with torch.{mode}():
        score = evaluate(net, batches)
    return score, (net[1].running_mean - before).abs().max().item()


result = main()
'''


def _run(src: str) -> tuple[float, float]:
    ns: dict[str, object] = {}
    exec(compile(src, "<snippet>", "exec"), ns)
    return ns["result"]  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_evaluation_called_under_grad_off_in_train_mode_is_reported(mode: str) -> None:
    src = SRC.format(switch="pass", mode=mode)
    assert _run(src)[1] > 0  # the statistics moved on the evaluation data
    assert ("GT540", 9) in [(f.code, f.line) for f in check_source(src)]


def test_model_put_in_eval_mode_before_the_call_is_silent() -> None:
    src = SRC.format(switch="net.eval()", mode="no_grad")
    assert _run(src)[1] == 0
    assert [f.code for f in check_source(src) if f.code == "GT540"] == []


def test_evaluation_switching_modes_itself_is_silent() -> None:
    src = SRC.format(switch="pass", mode="no_grad").replace(
        "    hits = 0\n", "    net.eval()\n    hits = 0\n", 1)
    assert _run(src)[1] == 0
    assert [f.code for f in check_source(src) if f.code == "GT540"] == []


SCRIPT = '''
import torch
import torch.nn as nn


def evaluate(net, batches):
    hits = 0
    with torch.no_grad():
        for x, y in batches:
            hits += (net(x).argmax(1) == y).sum().item()
    return hits


net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
moved = []
for epoch in range(2):
    net.train()
    for x, y in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    before = net[1].running_mean.clone()
    {before_eval}score = evaluate(net, batches)
    moved.append((net[1].running_mean - before).abs().max().item())
    {in_loop}
net.eval()
result = moved
'''


def _moved(src: str) -> list[float]:
    ns: dict[str, object] = {}
    exec(compile(src, "<snippet>", "exec"), ns)
    return ns["result"]  # type: ignore[return-value]


def test_module_eval_after_the_last_evaluation_does_not_excuse_it() -> None:
    src = SCRIPT.format(before_eval="", in_loop="")
    assert _moved(src)[0] > 0
    assert ("GT540", 10) in [(f.code, f.line) for f in check_source(src)]


def test_module_eval_before_the_evaluation_is_silent() -> None:
    src = SCRIPT.format(before_eval="net.eval()\n    ", in_loop="")
    assert max(_moved(src)) == 0
    assert [f.code for f in check_source(src) if f.code == "GT540"] == []


def test_eval_later_in_the_same_loop_counts_for_the_next_pass() -> None:
    # the switch after the call runs before the next pass's evaluation too; the first pass
    # evaluates in train mode, but the order inside a loop is not read: silent, as before
    src = SCRIPT.format(before_eval="", in_loop="net.eval()")
    assert [f.code for f in check_source(src) if f.code == "GT540"] == []


def test_evaluation_reached_through_two_grad_off_blocks_is_reported_once() -> None:
    src = SRC.format(switch="pass", mode="no_grad").replace(
        "        score = evaluate(net, batches)\n",
        "        score = evaluate(net, batches)\n    with torch.no_grad():\n"
        "        score = evaluate(net, batches)\n", 1)
    _run(src)
    assert [(f.code, f.line) for f in check_source(src) if f.code == "GT540"] == [("GT540", 9)]
