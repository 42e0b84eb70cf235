"""speed40: exact cuts of work repeated per ask on dense training scripts (issue 12), each with
the answer it must keep and a test that fails when the cheap path is undone.

- NOTE [asserted flags]: a scope's ``assert`` statements listed once (``flag-asserts``);
- module_sites/object_sites: the calls of an instance name grouped by kind once per name;
- NOTE [inherited methods]: the subclasses defining a name found through a name index;
- flag_set_between: the scope's ``requires_grad_`` calls from its method index;
- nonlocal_numbers: no walk when the code never spells ``nonlocal``;
- NOTE [helper cuts]: ``backward()`` in a helper read once, walked only when spelt;
- GT210 / grad-off regions: ``off_nodes`` of one body listed once (``off_list``).
"""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.engine import FileChecker


def _ctx(src: str):  # type: ignore[no-untyped-def]
    src = textwrap.dedent(src)
    return FileChecker("t.py", src, ast.parse(src), []).ctx


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), select=[code])]


# -- NOTE [asserted flags] ----------------------------------------------------------------------
def test_asserted_flags_before_the_call_only() -> None:
    from gradtrace.lint.analysis.flag_arms import known_flags
    ctx = _ctx("""
        def helper(x, is_feature):
            return x
        early = helper(1, flag)
        assert flag
        a = helper(1, flag)
        assert not other
        b = helper(1, other)
        flag = False
        c = helper(1, flag)
        """)
    fn, calls = ctx.tree.body[0], [s.value for s in ctx.tree.body if isinstance(s, ast.Assign)]
    scope = ctx.scope(ctx.tree)
    assert known_flags(ctx, scope, calls[0], fn) == {}  # the assert comes after the call
    assert known_flags(ctx, scope, calls[1], fn) == {"$is_feature": True}
    assert known_flags(ctx, scope, calls[2], fn) == {"$is_feature": False}
    assert known_flags(ctx, scope, calls[4], fn) == {}  # rebound between assert and call
    # fails if each call scans the whole body again instead of the listed asserts
    assert [s.lineno for s in ctx._memo[("flag-asserts", id(ctx.tree))]] == [5, 7]


# -- module_sites: calls of an instance name, by the class it holds ------------------------------
SITES = """
    import torch.nn as nn

    class A(nn.Module):
        def forward(self, x):
            return x

    class B(nn.Module):
        def forward(self, x):
            return x

    def one(x):
        model = A()
        return model(x)

    def two(x):
        model = B()
        return model(x)
    """


def test_module_sites_keep_each_class_its_own_calls() -> None:
    from gradtrace.lint.analysis.callees import module_sites
    ctx = _ctx(SITES)
    a = ctx.analysis
    assert [c.lineno for c, _ in module_sites(a, "A")] == [14]
    assert [c.lineno for c, _ in module_sites(a, "B")] == [18]
    assert module_sites(a, "C") == []
    # fails if each class reads every call of `model` again instead of the grouped calls
    assert ("called-kinds:model", id(ctx.tree)) in ctx._memo


# -- NOTE [inherited methods]: a template method defined by one subclass -------------------------
TEMPLATE = """
    class Base:
        def __call__(self, x):
            return self._compute(x)

    class One(Base):
        def _compute(self, x):
            return x

    class Other:
        def _compute(self, x):
            return -x
    """


def test_subclass_method_found_through_the_name_index() -> None:
    ctx = _ctx(TEMPLATE)
    base = ctx.analysis.classes["Base"]
    assert base.method("_compute") is ctx.analysis.classes["One"].methods["_compute"]
    owners = ctx._memo[("method-owners", id(ctx.tree))]  # fails if the index is not used
    assert [c.name for c in owners["_compute"]] == ["One", "Other"]


def test_two_subclasses_defining_the_name_leave_it_unknown() -> None:
    ctx = _ctx(TEMPLATE + """
    class Two(Base):
        def _compute(self, x):
            return 2 * x
    """)
    assert ctx.analysis.classes["Base"].method("_compute") is None


# -- flag_set_between ----------------------------------------------------------------------------
def test_flag_set_between_reads_the_method_index(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.lint.analysis.grad_sources import flag_set_between
    from gradtrace.lint.flow import Scope
    ctx = _ctx("""
        z = x.clone()
        w = x.clone()
        w.requires_grad_()
        z.requires_grad_(False)
        y = z.sum()
        z.requires_grad_()
        """)
    scope = ctx.scope(ctx.tree)
    assert flag_set_between(scope, "w", 3, 9)
    assert not flag_set_between(scope, "z", 2, 6)  # `requires_grad_(False)` sets no flag
    assert flag_set_between(scope, "z", 2, 8)

    def no_scan(self):  # type: ignore[no-untyped-def]
        raise AssertionError("every method call scanned")
    monkeypatch.setattr(Scope, "method_calls", property(no_scan))
    assert flag_set_between(scope, "z", 2, 8)  # fails if it scans `method_calls` again


# -- nonlocal_numbers ----------------------------------------------------------------------------
def test_nonlocal_counter_is_a_number_and_unspelt_keyword_walks_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.lint.analysis import toplevel
    from gradtrace.lint.analysis.origins import origins
    ctx = _ctx("""
        def outer():
            n = 0
            def loss_fn(x):
                nonlocal n
                n += 1
                return x
            return loss_fn
        """)
    inner = ctx.tree.body[0].body[1]
    assert toplevel.nonlocal_numbers(origins(ctx, inner)) == frozenset({"n"})
    plain = _ctx("""
        def loss_fn(x):
            return x
        """)

    def no_walk(node):  # type: ignore[no-untyped-def]
        raise AssertionError("walked")
    monkeypatch.setattr(toplevel, "walk", no_walk)
    assert toplevel.nonlocal_numbers(origins(plain, plain.tree.body[0])) == frozenset()


# -- NOTE [helper cuts]: a helper that runs backward() is left out -------------------------------
HELPERS = """
    import torch
    import torch.nn.functional as F

    def as_number(out, y):
        return torch.tensor(F.mse_loss(out, y).item(), requires_grad=True)

    def step(out, y):
        loss = torch.tensor(F.mse_loss(out, y).item(), requires_grad=True)
        loss.backward()
        return loss

    def train(model, x, y):
        loss = as_number(model(x), y)
        loss.backward()
        other = step(model(x), y)
        other.backward()
    """


def test_helper_running_backward_is_no_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.lint.analysis import helper_cuts
    ctx = _ctx(HELPERS)
    as_number, step = ctx.tree.body[2], ctx.tree.body[3]
    assert helper_cuts.helper_cut(ctx, as_number) is not None
    assert helper_cuts.helper_cut(ctx, step) is None  # it runs backward() itself
    walked: list[str] = []
    real = helper_cuts.walk

    def counting(node):  # type: ignore[no-untyped-def]
        walked.append(getattr(node, "name", ""))
        return real(node)
    monkeypatch.setattr(helper_cuts, "walk", counting)
    fresh = _ctx(HELPERS)
    assert helper_cuts._runs_backward(fresh, fresh.tree.body[3])
    assert not helper_cuts._runs_backward(fresh, fresh.tree.body[2])
    assert walked == ["step"]  # fails if a helper that never spells `backward` is walked


def test_helper_cut_reported_through_its_call() -> None:
    # the helper's cut (line 6, reached from train's backward) and step's own (line 9)
    assert _found(HELPERS, "GT102") == [("GT102", 6), ("GT102", 9)]


# -- GT210: grad-off bodies listed once ----------------------------------------------------------
PROBE = """
    import torch

    def fit_probe(model, x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    def validate(model, x, y):
        return fit_probe(model, x, y)

    def evaluate(model, x, y):
        with torch.no_grad():
            return validate(model, x, y)

    def evaluate_safe(model, x, y):
        with torch.no_grad():
            score = model(x).argmax(1)
        return score
    """


def test_gradient_reached_under_no_grad_is_reported_once_per_region() -> None:
    assert _found(PROBE, "GT210") == [("GT210", 10)]


def test_off_list_is_made_once_per_owner() -> None:
    from gradtrace.lint.analysis.grad_off_calls import off_list, off_nodes
    ctx = _ctx(PROBE)
    w = ctx.tree.body[3].body[0]
    got = off_list(ctx, w)
    assert got == list(off_nodes(w.body, ctx))
    assert off_list(ctx, w) is got  # fails if each ask walks the body again


# -- GT516: the globals a function reads, tested per name ----------------------------------------
def test_function_globals_are_tested_per_name() -> None:
    from gradtrace.lint.rules.training_loop import _modes
    ctx = _ctx("""
        import torch
        model = torch.nn.Linear(2, 2)
        data = 1
        def train(data):
            opt = 2
            model.train()
            return data, opt
        """)
    glob = _modes._globals(ctx, ctx.tree.body[-1])
    assert [n for n in ("model", "train", "data", "opt", "x") if n in glob] == ["model", "train"]
    assert isinstance(glob, _modes._Globals)  # fails if a set is built per function again


# -- GT758 and friends: loss lines by the innermost function holding them -------------------------
LOSS_LINES = """
    import torch.nn.functional as F

    def outer(x, y):
        def inner(a, b):
            return F.cross_entropy(a, b)
        def other(a):
            return a
        loss = F.cross_entropy(x, y)
        return inner(x, y) + loss

    def apart(x, y):
        return x

    top = F.cross_entropy(p, q)
    """


def test_loss_lines_go_to_the_innermost_function_or_the_module() -> None:
    from gradtrace.lint.rules.numerics._loss_lines import _candidate_lines
    ctx = _ctx(LOSS_LINES)
    got = {getattr(k, "name", "<module>"): v for k, v in _candidate_lines(ctx.tree, ctx).items()}
    # line 15 passes `outer`, `inner` and `apart` on the way back: none holds it
    assert got == {"inner": {6}, "outer": {9}, "<module>": {15}}


def test_last_backward_line_read_once_per_scope() -> None:
    from gradtrace.lint.rules.numerics._ops import _backward_after
    ctx = _ctx("""
        def fit(model, x):
            loss = model(x).sum()
            loss.backward()
            y = model(x)
        """)
    fn = ctx.tree.body[0]
    assert _backward_after(fn, 0, ctx) and _backward_after(fn, 4, ctx)
    assert not _backward_after(fn, 5, ctx)
    assert not _backward_after(ctx.tree, 0, ctx)  # no backward at the module level
    assert ctx._memo[("gt7-last-loss-line", id(fn))] == 4  # fails if the losses are read per ask
