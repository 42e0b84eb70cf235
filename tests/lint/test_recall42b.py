"""Session 42, helper recall42b: causes one call away from their symptom. Each fact: a buggy
twin reported on its line (and shown wrong on real torch where it is cheap) and a silent
look-alike, in other words than the real-world cases."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [constant on one path] (GT122): a method returns a fresh constant as one element of a
# tuple on one path; the caller averages a comprehension of that element and backpropagates
METHOD_TWIN = '''
import torch
from torch import nn


class Matcher(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def compare(self, a, b):
        d = (self.proj(a) - b).abs().sum()
        close = bool(d < 1e6)
        penalty = torch.zeros(()) if close else d
        return d.detach(), penalty


matcher = Matcher()
opt = torch.optim.SGD(matcher.parameters(), lr=0.1)
pairs = [(torch.randn(3), torch.randn(3)) for _ in range(4)]
for rnd in range(2):
    opt.zero_grad()
    parts = [matcher.compare(a, b)[1] for a, b in pairs]
    mean_part = sum(parts) / len(parts)
    mean_part.backward()
    opt.step()
'''
METHOD_TWIN_LINE = 14
# the look-alike looks at the value first and skips the step when nothing was lost
METHOD_LOOKALIKE = METHOD_TWIN.replace('''    mean_part.backward()
    opt.step()''', '''    seen = float(mean_part)
    if seen != 0.0:
        mean_part.backward()
        opt.step()''')

# a helper returns a constant early; the caller unpacks it and backpropagates it alone
HELPER_TWIN = '''
import torch


def masked_cost(pred, gold, keep):
    if int(keep.sum()) == 0:
        return torch.tensor(0.0).to(pred.device), 0
    return ((pred - gold)[keep] ** 2).mean(), int(keep.sum())


def fit(net, opt, rows):
    for x, y, keep in rows:
        opt.zero_grad()
        cost, n = masked_cost(net(x), y, keep)
        cost.backward()
        opt.step()


fit(torch.nn.Linear(2, 2), None, [])
'''
HELPER_TWIN_LINE = 7
# look-alikes: the constant is summed with a term that has a graph; the constant is written
# into in place (it takes the graph of what is written); the constant asks for a gradient
HELPER_LOOKALIKES = [
    HELPER_TWIN.replace("        cost.backward()", "        (cost + 0.0 * net.weight.sum()).backward()"),
    '''
import torch


def fit(net, opt, rows):
    for x, y in rows:
        opt.zero_grad()
        acc = torch.zeros(3)
        acc[0] = net(x).sum()
        acc.sum().backward()
        opt.step()
''',
    HELPER_TWIN.replace("torch.tensor(0.0)", "torch.tensor(0.0, requires_grad=True)"),
    '''
import torch


def fit(net, opt, rows):
    for x, y in rows:
        opt.zero_grad()
        total = torch.zeros(())
        for part in net(x):
            total = total + part.sum()
        total.backward()
        opt.step()
''',
]


# a list made empty and filled only by appends of the method's value, stacked and averaged
APPEND_TWIN = '''import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def hinge(self, pos, neg):
        gap = (self.fc(neg) - self.fc(pos)).sum()
        if float(gap) < -1.0:
            return torch.zeros(())
        return gap + 1.0


scorer = Scorer()
opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
pairs = [(torch.randn(3), torch.randn(3)) for _ in range(4)]
for ep in range(3):
    opt.zero_grad()
    parts = []
    for pos, neg in pairs:
        parts.append(scorer.hinge(pos, neg))
    torch.stack(parts).mean().backward()
    opt.step()
'''
APPEND_TWIN_LINE = 13
HELPER_LOOKALIKES += [
    # another append gives every pass a term with a graph
    APPEND_TWIN.replace("        parts.append(scorer.hinge(pos, neg))",
                        "        parts.append(scorer.hinge(pos, neg))\n"
                        "        parts.append(0.01 * scorer.fc(pos).sum())"),
    # the early return is built from the graph
    APPEND_TWIN.replace("return torch.zeros(())", "return gap * 0.0"),
]


def test_constant_returned_by_method_is_named_at_the_constant():
    assert _found(METHOD_TWIN, "GT122") == [METHOD_TWIN_LINE]
    assert _found(HELPER_TWIN, "GT122") == [HELPER_TWIN_LINE]
    assert _found(APPEND_TWIN, "GT122") == [APPEND_TWIN_LINE]


@pytest.mark.parametrize("src", [METHOD_LOOKALIKE] + HELPER_LOOKALIKES)
def test_constant_lookalikes_are_silent(src):
    assert _found(src, "GT122") == []


def test_constant_twin_raises_and_lookalike_trains_on_real_torch():
    # every pair is "close" (d < 1e6): every element is the constant, so the mean is one
    with pytest.raises(RuntimeError, match="does not require grad"):
        exec(compile(METHOD_TWIN, "<twin>", "exec"), {})
    exec(compile(METHOD_LOOKALIKE, "<lookalike>", "exec"), {})


# NOTE [clearing on one path] (GT523): each branch builds the loss, one backward after the
# `if` runs it, the step follows; only one branch clears
BRANCH_TWIN = '''
import torch
from torch import nn

body = nn.Linear(4, 4)
aux = nn.Linear(4, 1)
opt = torch.optim.Adam(list(body.parameters()) + list(aux.parameters()), lr=1e-2)
data = torch.randn(32, 4)
for it in range(12):
    if it % 3 == 0:
        objective = aux(body(data[:8])).pow(2).mean()
    else:
        opt.zero_grad()
        objective = (body(data) - data).pow(2).mean()
    objective.backward()
    opt.step()
'''
BRANCH_TWIN_LINE = 13
BRANCH_LOOKALIKES = [
    # cleared before the `if`
    BRANCH_TWIN.replace("        opt.zero_grad()\n", "").replace(
        "    if it % 3 == 0:", "    opt.zero_grad()\n    if it % 3 == 0:"),
    # the step itself is conditional: accumulation across the two kinds of pass
    BRANCH_TWIN.replace("    opt.step()", "    if it % 3 == 2:\n        opt.step()"),
    # only one branch builds the loss that is backpropagated
    BRANCH_TWIN.replace("        objective = aux(body(data[:8])).pow(2).mean()",
                        "        continue"),
]


# the clear is a method of the class, one call away
HELPER_BRANCH_TWIN = '''
import torch
from torch import nn


class Runner:
    def __init__(self):
        self.body = nn.Linear(4, 4)
        self.opt = torch.optim.Adam(self.body.parameters(), lr=1e-2)

    def clear(self):
        self.opt.zero_grad()

    def fit(self, data):
        for it in range(12):
            if it % 3 == 0:
                objective = self.body(data[:8]).pow(2).mean()
            else:
                self.clear()
                objective = (self.body(data) - data).pow(2).mean()
            objective.backward()
            self.opt.step()
'''
HELPER_BRANCH_TWIN_LINE = 19
BRANCH_LOOKALIKES += [
    # the helper is called before the `if`
    HELPER_BRANCH_TWIN.replace("                self.clear()\n", "").replace(
        "            if it % 3 == 0:", "            self.clear()\n            if it % 3 == 0:"),
    # the helper also steps: it is a step wrapper, not a clear
    HELPER_BRANCH_TWIN.replace("        self.opt.zero_grad()\n",
                               "        self.opt.step()\n        self.opt.zero_grad()\n"),
]


def test_zero_grad_on_one_branch_before_a_shared_backward():
    assert _found(BRANCH_TWIN, "GT523") == [BRANCH_TWIN_LINE]
    assert _found(HELPER_BRANCH_TWIN, "GT523") == [HELPER_BRANCH_TWIN_LINE]


@pytest.mark.parametrize("src", BRANCH_LOOKALIKES)
def test_zero_grad_on_one_branch_lookalikes_are_silent(src):
    assert _found(src, "GT523") == []


# GT538 (the lead folded this helper's GT481 into recall42c's more general GT538 at the merge):
# an optimizer class differentiates `.grad` once per probe in a loop, without keeping the graph;
# the caller built it with `backward(create_graph=True)`
PROBE_TWIN = '''
import torch
from torch import nn


class CurvatureAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, draws=3):
        self.draws = draws
        super().__init__(params, dict(lr=lr))

    def diag(self, ws):
        gs = [w.grad for w in ws]
        acc = [torch.zeros_like(w) for w in ws]
        for k in range(self.draws):
            rs = [torch.randint(0, 2, w.shape).float() * 2 - 1 for w in ws]
            hr = torch.autograd.grad(gs, ws, grad_outputs=rs)
            for a, h, r in zip(acc, hr, rs):
                a.add_(h * r / self.draws)
        return acc

    @torch.no_grad()
    def step(self):
        ws = [w for g in self.param_groups for w in g["params"]]
        with torch.enable_grad():
            acc = self.diag(ws)
        for w, a in zip(ws, acc):
            w.sub_(self.param_groups[0]["lr"] * w.grad / (a.abs() + 1e-3))


net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = CurvatureAdam(net.parameters())
xs = torch.randn(16, 3)
for it in range(3):
    opt.zero_grad()
    net(xs).pow(2).mean().backward(create_graph=True)
    opt.step()
'''
PROBE_TWIN_LINE = 16
PROBE_LOOKALIKES = [
    PROBE_TWIN.replace("grad_outputs=rs)", "grad_outputs=rs, retain_graph=k + 1 < self.draws)"),
    # one draw only: the loop runs once
    PROBE_TWIN.replace("for k in range(self.draws):", "for k in range(1):"),
]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_probe_loop_frees_the_graph():
    assert _found(PROBE_TWIN, "GT538") == [PROBE_TWIN_LINE]
    with pytest.raises(RuntimeError, match="second time"):
        exec(compile(PROBE_TWIN, "<twin>", "exec"), {})
    exec(compile(PROBE_LOOKALIKES[0], "<lookalike>", "exec"), {})


@pytest.mark.parametrize("src", PROBE_LOOKALIKES)
def test_probe_loop_lookalikes_are_silent(src):
    assert _found(src, "GT538") == []
