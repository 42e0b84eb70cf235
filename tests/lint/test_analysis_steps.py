"""The shared step facts and statement paths: one recogniser of backward callers for every
rule family (NOTE [backward callers]) and the bindings that may reach a use."""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint.analysis.paths import place, statement_paths
from gradtrace.lint.analysis.steps import backward_loss, step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports


def context(src: str) -> Context:
    text = textwrap.dedent(src)
    tree = ast.parse(text)
    imports = Imports()
    for s in ast.walk(tree):
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    return Context("m.py", text, tree, imports)


@pytest.mark.parametrize("call, loss", [
    ("loss.backward()", "loss"),
    ("(a + b).backward(retain_graph=True)", "a + b"),
    ("scaler.scale(loss).backward()", "loss"),
    ("accelerator.backward(loss)", "loss"),
    ("self.accelerator.backward(loss)", "loss"),
    ("model_engine.backward(loss)", "loss"),
    ("self.trainer.backward(loss)", "loss"),
    ("ds_model.backward(loss)", "loss"),
    ("self.manual_backward(loss)", "loss"),
    ("self.backward(loss)", "loss"),
    ("torch.autograd.backward(loss)", "loss"),
    ("backward(loss)", "loss"),
    ("torch.autograd.grad(loss, x)", None),     # fills no .grad
    ("model.forward(x)", None),
])
def test_one_recogniser_of_backward_callers(call: str, loss: str | None) -> None:
    ctx = context(f"import torch\nfrom torch.autograd import backward\n{call}\n")
    node = ctx.tree.body[-1].value  # type: ignore[attr-defined]
    got = backward_loss(node, ctx)
    assert (ast.unparse(got) if got is not None else None) == loss


def test_step_calls_of_a_training_loop() -> None:
    ctx = context("""
        import torch
        def train(model, opt, loader, scaler):
            for x, y in loader:
                opt.zero_grad()
                loss = model(x).sum()
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
        """)
    fn = ctx.tree.body[1]
    calls = step_calls(ctx, fn)
    assert [b.call.lineno for b in calls.losses()] == [7]
    assert [(s.optimizer, s.call.lineno) for s in calls.steps] == [("opt", 9)]
    assert [z.receiver for z in calls.zero_grads] == ["opt"]
    assert [c.call.lineno for c in calls.clips] == [8]
    assert step_calls(ctx, fn) is calls  # computed once per function


def test_bindings_that_may_reach_a_use() -> None:
    ctx = context("""
        def f(c):
            x = 1
            if c:
                x = 2
            y = x
            if c:
                x = 3
                z = x
            with c:
                x = 4
            w = x
        """)
    fn = ctx.tree.body[0]
    scope, paths = ctx.scope(fn), statement_paths(ctx, fn)

    def reaching(line: int) -> list[int]:
        use = next(s for s in scope.stmts if s.lineno == line)
        return [b.line for b in paths.reaching(scope.bindings_before("x", line), use)]

    assert reaching(6) == [5, 3]       # the branch may not run: both reach
    assert reaching(9) == [8]          # in the branch that rebinds it: only that one
    assert reaching(12) == [11]        # a with body always runs


def _chains(node: ast.AST, chain: list[ast.AST]):
    """(statement, its enclosing statements as the engine stacks them: handlers and match
    cases included, the statement last) for every statement under ``node``."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for s in getattr(node, field, None) or ():
            here = [*chain, s]
            if isinstance(s, ast.stmt):
                yield s, here
            yield from _chains(s, here)


def test_place_is_the_last_step_of_the_indexed_path() -> None:
    ctx = context("""
        def f(x, ys):
            if x:
                a = 1
            elif ys:
                a = 2
            else:
                a = 3
            for y in ys:
                x += y
            else:
                x -= 1
            try:
                x[0] = 1
            except ValueError:
                x.add_(1)
            else:
                x *= 2
            finally:
                x /= 2
            with ctx():
                x += 1
            match x:
                case 1:
                    x += 1
                case _:
                    x -= 1
            class C:
                z = 1
            return x
        """)
    fn = ctx.tree.body[0]
    index = statement_paths(ctx, fn)
    seen = 0
    for s, chain in _chains(fn, [fn]):
        ctx.stmts[:] = chain
        path = index.paths.get(id(s))
        got = place(ctx, fn, s)
        if path is None:
            assert got is None, s.lineno  # inside the nested class
        else:
            assert got is not None and got[0] == path[-1], s.lineno
            assert got[1] is index.blocks[path[-1][:2]]
            seen += 1
    assert seen == 20  # all but the class body's statement
    ctx.stmts[:] = []
    s = fn.body[1].body[0]  # not the visited statement: the index answers
    assert place(ctx, fn, s) == (index.paths[id(s)][-1], fn.body[1].body)
