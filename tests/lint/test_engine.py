"""Engine behaviour: import resolution, grad-mode context, trigger gating, rule crashes."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.names import Imports
from gradtrace.lint.rule import Rule


def qualified(src: str, expr: str) -> str | None:
    imports = Imports()
    for node in ast.parse(src).body:
        imports.add(node)
    return imports.qualified_name(ast.parse(expr, mode="eval").body)


def test_import_spellings_resolve_to_one_meaning():
    assert qualified("import torch as T", "T.no_grad") == "torch.no_grad"
    assert qualified("from torch import no_grad", "no_grad") == "torch.no_grad"
    assert qualified("import torch.nn.functional as F", "F.relu") == "torch.nn.functional.relu"
    assert qualified("from torch.optim import SGD", "SGD") == "torch.optim.SGD"
    assert qualified("import torch.nn", "torch.nn.Linear") == "torch.nn.Linear"
    assert qualified("from torch.autograd import grad_mode", "grad_mode.no_grad") == "torch.no_grad"
    assert qualified("from . import torch", "torch.no_grad") == "torch.no_grad"  # unresolved: as written
    assert qualified("", "f().x") is None


class Probe(Rule):
    """Records the grad mode at every call to `probe`."""

    code = "GT990"
    name = "probe"
    message = "{mode}"
    triggers = ("probe",)
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.qualified_name(node.func) == "probe":
            off = ctx.grad_disabled
            yield self.report(node, ctx, mode="off" if off is not None else "on")


class Crash(Rule):
    """Crashes on every call."""

    code = "GT991"
    name = "crash"
    message = "never"
    triggers = ("probe",)
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        raise ValueError("boom")


def run(src: str, *rules: type[Rule]) -> FileChecker:
    checker = FileChecker("t.py", src, ast.parse(src), [r() for r in rules])
    checker.run()
    return checker


def modes(src: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in run(src, Probe).findings]


def test_grad_mode_nesting():
    src = """\
import torch
probe()
with torch.no_grad():
    probe()
    with torch.enable_grad():
        probe()
with torch.inference_mode():
    with torch.enable_grad():
        probe()
    with torch.inference_mode(False):
        probe()
with torch.set_grad_enabled(False):
    probe()
with torch.set_grad_enabled(training):
    probe()
@torch.no_grad()
def f():
    probe()
    def g():
        probe()
"""
    assert modes(src) == [(2, "on"), (4, "off"), (6, "on"), (9, "off"), (11, "on"),
                          (13, "off"), (15, "on"), (18, "off"), (20, "on")]


def test_alias_of_imported_name_is_a_trigger():
    src = "import torch\nfrom mylib import probe as pr\npr()\n"
    # `pr` resolves to mylib.probe, not `probe`: the probe stays silent, but the line was seen
    checker = run(src, Probe)
    assert checker._line_rules.get(3)


def test_rule_crash_is_reported_and_other_rules_go_on(monkeypatch):
    monkeypatch.delenv("GRADTRACE_STRICT", raising=False)
    checker = run("import torch\nprobe()\nprobe()\n", Crash, Probe)
    assert [f.line for f in checker.findings if f.code != "GT002"] == [2, 3]
    assert [(f.code, f.line) for f in checker.findings if f.code == "GT002"] == [("GT002", 2)]
    assert len(checker.errors) == 1 and checker.errors[0].code == "GT991"
    assert "boom" in str(checker.errors[0])


def test_expression_visitors_only_run_on_trigger_lines():
    checker = run("import torch\nx = 1\nprobe()\n", Probe)
    assert set(checker._line_rules) == {3}


ZOO = '''\
import torch, torch.nn as nn
from torch import no_grad as ng, optim
import numpy as np
x: torch.Tensor = torch.randn(3, requires_grad=True)
y = z = x * 2
a, *rest = [x.item(), x.detach(), x.data, x.grad, x.numpy()]
del rest
assert x is not None, "x"
lam = lambda t: t.detach().sum().backward()
vals = {k: v.item() for k, v in {"a": x}.items() if v.requires_grad}
gen = (t.tolist() for t in [x] if (n := t.numel()) > 0)
s = {t.float() for t in [x]}
f = f"{x.item():.3f} {x!r:>{n}}"
global_state = None


@torch.no_grad()
@ng()
def deco(model, optimizer, loss=None):
    global global_state
    for i, (inp, tgt) in enumerate(zip([x], [x])):
        with torch.enable_grad(), torch.set_grad_enabled(True) as g:
            out = model(inp); loss = (out - tgt).pow(2).mean()
        loss.backward(retain_graph=True); optimizer.step(); optimizer.zero_grad()
    else:
        pass
    while False:
        break
    try:
        pass
    except* OSError:
        pass
    try:
        raise ValueError("v") from None
    except (ValueError, TypeError) as e:
        print(e)
    finally:
        global_state = torch.tensor([loss.item()])
    match loss:
        case torch.Tensor() if loss.requires_grad:
            loss.backward()
        case [a, b, *c]:
            pass
        case {"k": v, **kw}:
            pass
        case _:
            pass
    return loss


class Net(nn.Module, metaclass=type):
    layers = [nn.Linear(2, 2)]

    def __init__(self, *args, k: int = 1, **kw) -> None:
        super().__init__()
        self.blocks = [nn.Linear(2, 2) for _ in range(k)]
        self.w = nn.Parameter(torch.randn(2)).to("cpu")
        self.requires_grad = False

    async def forward(self, x):
        async with self.lock:
            async for item in self.stream:
                yield item.detach()
        await self.done
        nonlocal_value = [v async for v in self.stream]
        return


opt = optim.SGD(Net().parameters(), lr=0.1)
w = torch.zeros(2, requires_grad=True)
w = w - 0.1 * w.grad
w[0] = 1.0
w += 1
if __name__ == "__main__":
    total = 0
    for step in range(3):
        total += deco(Net(), opt)
'''


def test_syntax_zoo_runs_every_rule_without_crash(monkeypatch):
    """Every rule on every kind of statement and expression: no crash (strict mode)."""
    from gradtrace.lint.registry import all_rules

    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    checker = FileChecker("zoo.py", ZOO, ast.parse(ZOO), [r() for r in all_rules()])
    checker.run()
    assert checker.errors == []
    assert {f.code for f in checker.findings}  # something real was found in all that


def test_imports_in_skipped_functions_still_count():
    """NOTE [quiet subtrees]: a function without trigger words is skipped, its imports are not."""
    src = """\
import torch
def helper():
    from torch import no_grad as ng
with ng():
    probe()
"""
    assert modes(src) == [(5, "off")]


class AssignSeen(Rule):
    """Reports every assignment it is shown (a rule with gate_statements="function")."""

    code = "GT992"
    name = "assign-seen"
    message = "seen"
    triggers = ("probe",)
    gate_statements = "function"
    examples = []

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


def test_function_gated_rules_see_module_level_and_their_functions():
    src = """\
probe = 1
def quiet():
    a = 2
def loud():
    b = 3
    probe()
class C:
    c = 4
    def m(self):
        d = 5
"""
    assert [f.line for f in run(src, AssignSeen).findings] == [1, 5, 8]


def test_function_gated_rules_are_not_shown_statements_of_other_functions():
    """A statement walked for another rule (`other` is its word) inside a function without
    the words of a gate_statements="function" rule is not shown to that rule."""
    src = """\
def quiet():
    a = other()
def loud():
    b = other()
    probe()
"""
    checker = run(src, AssignSeen, Probe)
    assert [f.line for f in checker.findings if f.code == "GT992"] == [4]
    other = type("OtherProbe", (Probe,), {"code": "GT994", "triggers": ("other",)})
    checker = run(src, AssignSeen, other)
    assert [f.line for f in checker.findings if f.code == "GT992"] == [4]


class CallSeenWithSplit(Rule):
    """Reports every `probe` call in a function that also holds `chunk` or a `for`
    (a rule with function_requires)."""

    code = "GT993"
    name = "call-seen-with-split"
    message = "seen"
    triggers = ("probe",)
    function_requires = ("chunk", "for")
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.func, ast.Name) and node.func.id == "probe":
            yield self.report(node, ctx)


def test_function_requires_keeps_the_functions_holding_a_required_word():
    """NOTE [function requires]: a `probe` call is seen only in a function holding `chunk`
    (as a substring: `rechunk`), a `for` keyword (`for(x)` too; not `forward` nor a `for`
    in a comment or a string), or a local alias of an imported name holding `chunk`;
    never outside functions."""
    src = """\
from torch import chunk as ck
probe()
def forward(x):  # for
    probe("for x in y")
def a(x):
    probe(x.rechunk(2))
def b(x):
    for(y) in x:
        pass
    probe()
def c(x):
    probe(ck(x))
class C:
    probe()
    def m(self):
        def inner():
            probe()
        return [v for v in self]
"""
    assert [f.line for f in run(src, CallSeenWithSplit).findings] == [6, 10, 12, 17]
    plain = src.replace("from torch import chunk as ck", "import torch")
    assert [f.line for f in run(plain, CallSeenWithSplit).findings] == [6, 10, 17]
    neg = plain.replace("x.rechunk(2)", "x").replace("for(y) in x:", "while x:").replace(
        "[v for v in self]", "self")
    assert run(neg, CallSeenWithSplit).findings == []


def test_no_file_state_outlives_its_check():
    """Per-file caches must die with the file (NOTE [gc]): no Context stays reachable."""
    import gc

    from gradtrace.lint import check_source
    src = """\
import torch
def train(model, x, y, opt):
    out = model(x).detach()
    loss = ((out - y) ** 2).mean()
    loss.backward()
    opt.step()
"""
    from gradtrace.lint.analysis.project_files import FILES
    assert check_source(src)
    gc.collect()
    # other files of a project read for cross-file facts are kept on purpose, at most
    # MAXFILES per process (NOTE [project index]): an earlier test in this process may have
    # checked such a project; only those contexts may outlive their check
    kept = {id(f.ctx) for f in FILES.values() if f is not None}
    # type(), not isinstance(): isinstance() warns on some of torch's deprecated objects
    assert not [o for o in gc.get_objects() if type(o) is Context and id(o) not in kept]
