"""speed41: text gates before whole-file walks (issue 12), each with the answer it must keep
and a test that fails when the cheap path is undone.

- NOTE [GT556 text gates]: methods and functions read only when their lines spell the words;
- NOTE [stores of one attribute]: ``self.x``'s stores from the statements naming ``x``;
- NOTE [step spelt]: GT547 skips a file that spells neither ``step`` nor ``optimizer_step``.
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


# -- NOTE [GT556 text gates] --------------------------------------------------------------------
RESUME = """
    import torch

    class Trainer:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.Adam(model.parameters())

        def report(self):
            return len(self.model.state_dict())

        @staticmethod
        def noop(x):
            return x

        def resume(self, ckpt):
            self.optimizer.load_state_dict(ckpt["opt"])

        def setup(self, lr):
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

    def helper(x):
        return x + 1

    def main(model, ckpt):
        t = Trainer(model)
        t.resume(ckpt)
        t.setup(1e-3)
        return t
    """


def test_gt556_through_a_loading_method_still_found() -> None:
    assert _found(RESUME, "GT556") == [("GT556", 28)]
    # the look-alike: the rebuild before the load
    assert _found(RESUME.replace("t.resume(ckpt)\n        t.setup(1e-3)",
                                 "t.setup(1e-3)\n        t.resume(ckpt)"), "GT556") == []


def test_gt556_reads_only_methods_that_spell_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.lint.rules.training_loop import state_rebuilt
    walked: list[str] = []
    real = state_rebuilt._method_loads

    def spy(ctx, methods):  # type: ignore[no-untyped-def]
        walked.extend(getattr(m, "name", "?") for m in methods)
        return real(ctx, methods)
    monkeypatch.setattr(state_rebuilt, "_method_loads", spy)
    assert _found(RESUME, "GT556") == [("GT556", 28)]
    # fails if every method of every class is walked for a load again
    assert "report" not in walked and "noop" not in walked and "resume" in walked


def test_gt556_non_ascii_code_reads_every_method(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.lint.rules.training_loop import state_rebuilt
    walked: list[str] = []
    real = state_rebuilt._method_loads

    def spy(ctx, methods):  # type: ignore[no-untyped-def]
        walked.extend(getattr(m, "name", "?") for m in methods)
        return real(ctx, methods)
    monkeypatch.setattr(state_rebuilt, "_method_loads", spy)
    src = RESUME.replace("def helper(x):", "def hélper(x):")
    assert _found(src, "GT556") == [("GT556", 28)]
    assert "report" in walked  # a non-ASCII name may normalise to the attribute


# -- NOTE [stores of one attribute] -------------------------------------------------------------
STORES = """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.feats = None
            self.other = 1

        @hook(self_feats=1)
        def forward(self, x):
            out = self.layer(x)
            self.feats = out.detach()
            self.hist.append(out)
            self.buf[0] = out
            self.a, self.feats = 1, out.detach()
            return out

    def script(net):
        net.feats = 3
        net.hist.extend([1])
    """


@pytest.mark.parametrize("attr", ["feats", "hist", "buf", "other", "a", "missing"])
def test_stores_of_one_attribute_match_the_whole_walk(attr: str) -> None:
    from gradtrace.lint.analysis.attr_origins import _stores, _stores_of
    ctx = _ctx(STORES)
    assert _stores_of(ctx, attr) == _stores(ctx).get(attr)


def test_stores_of_one_attribute_skip_the_whole_walk() -> None:
    from gradtrace.lint.analysis.attr_origins import _stores_of
    ctx = _ctx(STORES)
    got = _stores_of(ctx, "feats")
    assert [(c.name if c else None, s is not None) for c, s in got] == [
        (None, False), ("Net", True), ("Net", True), ("Net", True)]  # (the walk's order)
    # fails if the whole file is walked again for one attribute
    assert ("attr-stores", id(ctx.tree)) not in ctx._memo


def test_stores_with_setattr_take_the_whole_walk() -> None:
    from gradtrace.lint.analysis.attr_origins import _stores, _stores_of
    ctx = _ctx(STORES + "\n    setattr(net, 'feats', 2)\n")
    assert _stores_of(ctx, "other") == _stores(ctx).get("other")
    assert _stores_of(ctx, "other")[-1] == (None, None)  # setattr stores every attribute
    assert ("attr-stores", id(ctx.tree)) in ctx._memo


# -- NOTE [step spelt] --------------------------------------------------------------------------
BASE_STEPS = """
    import torch

    class Base(torch.nn.Module):
        def train_round(self, batch):
            self.opt.step()

    class Child(Base):
        def __init__(self, model, sched=None):
            super().__init__()
            self.sched = sched

        def train_round(self, batch):
            if self.sched is not None:
                self.sched.step()
                super().train_round(batch)
    """


def test_gt547_base_class_step_still_found() -> None:
    assert _found(BASE_STEPS, "GT547") == [("GT547", 16)]
    fixed = BASE_STEPS.replace("                super().train_round(batch)",
                               "            super().train_round(batch)")
    assert _found(fixed, "GT547") == []  # the look-alike: the parent called on every path


def test_gt547_skips_a_file_that_spells_no_step() -> None:
    from gradtrace.lint.rules.training_loop.parent_step import ParentStepUnderOptionalObject
    src = BASE_STEPS.replace("self.opt.step()", "self.opt.advance()").replace(
        "self.sched.step()", "self.sched.advance()")
    assert _found(src, "GT547") == []
    ctx = _ctx(src)
    cls = ctx.tree.body[2]
    assert list(ParentStepUnderOptionalObject().visit_ClassDef(cls, ctx)) == []
    # fails if the classes are read in a file that cannot step
    assert ctx._analysis is None
