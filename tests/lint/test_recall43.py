"""Session 43, helper recall43: facts found missing by injected bugs in real training steps
(benchmarks/mutation_recall.py on the unseen corpora). Each fact: a buggy twin reported on its
line and a silent look-alike, in words other than the corpora's."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [weightless callee]: the loss callee is a torch loss chosen by a method of the class
# (several arms, each a different loss class), so `.data` on the model's output leaves the
# loss without graph
CHOSEN = '''
import torch
import torch.nn as nn


class Fitter:
    def __init__(self, net, mode):
        self.net = net
        self.mode = mode

    def _pick_measure(self):
        if self.mode == "sq":
            return nn.MSELoss()
        elif self.mode == "abs":
            return nn.L1Loss()
        raise ValueError(self.mode)

    def fit(self, pairs):
        measure = self._pick_measure()
        opt = torch.optim.Adam(self.net.parameters())
        for a, b in pairs:
            opt.zero_grad()
            guess = {GUESS}
            err = measure(guess, b)
            err.backward()
            opt.step()
'''


def test_loss_chosen_by_a_method_twin():
    assert _found(CHOSEN.replace("{GUESS}", "(self.net(a)).data"), "GT105") == [23]


def test_loss_chosen_by_a_method_lookalike():
    assert _found(CHOSEN.replace("{GUESS}", "self.net(a)"), "GT105") == []


# the callee is a weighted module of the file (a critic trained on a detached sample: the
# detach is the point), chosen by the same kind of method: no finding
CRITIC = '''
import torch
import torch.nn as nn


class Judge(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 1)

    def forward(self, x, y):
        return (self.score(x) - y).pow(2).mean()


class Fitter:
    def __init__(self, maker):
        self.maker = maker

    def _pick_measure(self):
        return Judge()

    def fit(self, pairs):
        measure = self._pick_measure()
        opt = torch.optim.Adam(measure.parameters())
        for a, b in pairs:
            opt.zero_grad()
            sample = (self.maker(a)).detach()
            err = measure(sample, b)
            err.backward()
            opt.step()
'''


def test_weighted_callee_from_a_method_stays_silent():
    assert _found(CRITIC, "GT107") == [] and _found(CRITIC, "GT105") == []


# a helper of the file builds a torch layer without weights and calls it: the helper is as
# live as its arguments, so a `.data` prediction handed to it leaves the loss without graph
HELPER = '''
import torch
import torch.nn as nn


def soft_xent(pred, dist):
    squash = nn.LogSoftmax(dim=1)
    return torch.mean(torch.sum(-dist * squash(pred), 1))


def run_epoch(net, rows, opt):
    for feats, dist in rows:
        opt.zero_grad()
        pred = {PRED}
        total = soft_xent(pred, dist)
        total.backward()
        opt.step()
        hits = (pred.data.argmax(1) == dist.argmax(1)).sum()
'''


def test_weightless_layer_in_a_helper_twin():
    assert _found(HELPER.replace("{PRED}", "(net(feats)).data"), "GT105") == [14]


def test_weightless_layer_in_a_helper_lookalike():
    # `.data` only in the accuracy count: the loss keeps its graph
    assert _found(HELPER.replace("{PRED}", "net(feats)"), "GT105") == []


# a helper holding a layer WITH weights is not pure: silent, as before
WEIGHTED_HELPER = '''
import torch
import torch.nn as nn


def scored(pred, dist):
    head = nn.Linear(4, 4)
    return torch.mean(torch.sum(-dist * head(pred), 1))


def run_epoch(net, rows, opt):
    for feats, dist in rows:
        opt.zero_grad()
        pred = (net(feats)).detach()
        total = scored(pred, dist)
        total.backward()
        opt.step()
'''


def test_weighted_layer_in_a_helper_stays_silent():
    assert _found(WEIGHTED_HELPER, "GT107") == [] and _found(WEIGHTED_HELPER, "GT105") == []


# a parameter every caller passes a torch loss made by a function of the file
PASSED = '''
import torch
import torch.nn as nn


def make_measure(kind):
    if kind == "sq":
        return nn.MSELoss()
    return nn.SmoothL1Loss()


def loop(net, rows, opt, judge):
    for feats, goal in rows:
        opt.zero_grad()
        out = {OUT}
        gap = judge(out, goal)
        gap.backward()
        opt.step()


def main(net, rows):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    judge = make_measure("sq")
    loop(net, rows, opt, judge)
'''


def test_passed_loss_made_by_a_factory_twin():
    assert _found(PASSED.replace("{OUT}", "(net(feats)).data"), "GT105") == [15]


def test_passed_loss_made_by_a_factory_lookalike():
    assert _found(PASSED.replace("{OUT}", "net(feats)"), "GT105") == []


# NOTE [container spellings] (GT401): layers kept in a plain list spelled through `list(...)`
SPELLED = '''
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self, width, depth, sizes):
        super().__init__()
        self.stack = {STACK}
        self.pools = list(nn.MaxPool1d(k) for k in sizes)

    def forward(self, x):
        for f in self.stack:
            x = f(x)
        return x
'''


def test_layers_in_list_of_generator_twin():
    src = SPELLED.replace("{STACK}", "list(nn.Linear(width, width) for _ in range(depth))")
    assert _found(src, "GT401") == [8]


def test_layers_in_list_of_concatenation_twin():
    src = SPELLED.replace("{STACK}", "list([nn.Linear(3, width)] + [nn.Linear(width, width) "
                                     "for _ in range(depth)])")
    assert _found(src, "GT401") == [8]


def test_layers_in_list_spelled_lookalike():
    # registered the same way, and a list of pooling layers (no weights to lose): silent
    src = SPELLED.replace("{STACK}", "nn.ModuleList(nn.Linear(width, width) "
                                     "for _ in range(depth))")
    assert _found(src, "GT401") == []


REWRAPPED = '''
import torch.nn as nn


class Bank(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.cells = []
        for w in widths:
            self.cells.append(nn.Conv1d(4, 4, w))
        self.cells = {WRAP}(self.cells)

    def forward(self, x):
        return sum(c(x) for c in self.cells)
'''


def test_filled_list_rewrapped_in_list_twin():
    assert _found(REWRAPPED.replace("{WRAP}", "list"), "GT401") == [8]


def test_filled_list_rewrapped_in_modulelist_lookalike():
    assert _found(REWRAPPED.replace("{WRAP}", "nn.ModuleList"), "GT401") == []
