"""Session 46, helper recall46: static facts across calls (issue 13 part 3). Each fact: a buggy
twin reported on the cause's line and silent look-alikes."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [backward through calls]: a component leaves grad off for the thread; the training runs
# later, two calls deep, through methods of instances of classes of the file
STAGES = '''
import torch
import torch.nn as nn


class Scaler:
    def apply(self, batch):
        torch.set_grad_enabled(False)
        return batch / batch.abs().max()


def fit(net, batch, target, rounds=5):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(rounds):
        opt.zero_grad()
        loss = (net(batch) - target).pow(2).mean()
        loss.backward()
        opt.step()
    return loss.item()


class Trainer:
    def __init__(self, net):
        self.net = net

    {deco}
    def run(self, batch, target):
        return fit(self.net, batch, target)


def main():
    net = nn.Linear(4, 1)
    batch, target = torch.randn(8, 4), torch.randn(8, 1)
    {first}
    {second}


main()
'''

_LEAK = "batch = Scaler().apply(batch)"
_TRAIN = "print(Trainer(net).run(batch, target))"


def test_leaked_grad_off_reaches_training_through_fresh_instances():
    src = STAGES.format(deco="", first=_LEAK, second=_TRAIN)
    assert _found(src, "GT203") == [8]


def test_leaked_grad_off_reaches_training_through_held_instance():
    src = STAGES.format(deco="", first="s = Scaler()\n    batch = s.apply(batch)",
                        second="t = Trainer(net)\n    print(t.run(batch, target))")
    assert _found(src, "GT203") == [8]


def test_lookalike_training_method_turns_grad_back_on():
    for deco in ("@torch.enable_grad()", "@torch.inference_mode(False)",
                 "@torch.set_grad_enabled(True)"):
        src = STAGES.format(deco=deco, first=_LEAK, second=_TRAIN)
        assert _found(src, "GT203") == [], deco


def test_lookalike_training_runs_before_the_leak():
    src = STAGES.format(deco="", first=_TRAIN, second=_LEAK)
    assert _found(src, "GT203") == []


def test_lookalike_training_only_in_a_callback_never_called():
    src = STAGES.replace(
        "        return fit(self.net, batch, target)",
        "        def later():\n            return fit(self.net, batch, target)\n"
        "        return later").format(deco="", first=_LEAK, second=_TRAIN)
    assert _found(src, "GT203") == []


def test_lookalike_no_training_reached():
    src = STAGES.replace("        loss.backward()\n", "").format(
        deco="", first=_LEAK, second=_TRAIN)
    assert _found(src, "GT203") == []
