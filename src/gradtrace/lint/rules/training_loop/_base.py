"""The base class of the training-loop rules (GT5xx) and the helpers every rule of the family
uses; the rules live in the other modules of this package."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Rule
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts

# trigger words: a backward *call*, not "backward compatibility" in a model file
BACKWARD_CALLS = (".backward(", "manual_backward(", "autograd.grad(", "autograd.backward(")
NEED_SPELLINGS = {
    "backward": (".backward(", "manual_backward(", "autograd.grad(", "autograd.backward("),
    "step": (".step(", "optimizer_step("),
}
SCRIPT_TOP = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)
TOP_BACKWARD_RE = re.compile(r"(?m)^[^\s#].*\.backward\(")


class LoopRule(Rule):
    """Base of the training-loop rules: analyse each function (and the module body) once,
    when its text holds every word of ``function_needs``."""

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._entry(node, ctx)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef,
                               ctx: Context) -> Iterator[Finding]:
        yield from self._entry(node, ctx)

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if script_body(ctx, node):
            yield from self._entry(node, ctx)  # script code at module level

    def _entry(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if self.wants(function_text(ctx, node)) if type(self).wants is not LoopRule.wants \
                else needs_met(ctx, node, self.function_needs):
            yield from self.check(facts(ctx, node), ctx)

    # words the function's own text must hold (as calls, for "backward" and "step")
    function_needs: tuple[str, ...] = ("backward", "step")

    def wants(self, text: str) -> bool:
        """Cheap text test before any analysis: every word of ``function_needs`` appears."""
        return all(any(c in text for c in NEED_SPELLINGS.get(w, (w,)))
                   for w in self.function_needs)

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:  # pragma: no cover
        return iter(())


def script_body(ctx: Context, node: ast.Module) -> bool:
    """The module body runs script code (a loop or ``with`` at its top, an ``if __name__ ==
    "__main__":`` block running one, or a top-level ``.backward(`` line): asked by every loop
    rule, decided once per file."""
    return ctx.memo("gt5-script", node, lambda: any(
        isinstance(s, SCRIPT_TOP) or _main_script(s) for s in node.body) or bool(
        ctx.mentions(".backward(") and TOP_BACKWARD_RE.search(ctx.code)))


def needs_met(ctx: Context, node: ast.AST, needs: tuple[str, ...]) -> bool:
    """:meth:`LoopRule.wants` of ``needs`` on ``node``'s :func:`function_text`: each word
    searched once per function for all the loop rules (a dense file's functions are asked by
    some thirty of them, most needing "backward" and "step")."""
    held: dict[str, bool] = ctx.memo("gt5-words", node, dict)
    for w in needs:
        got = held.get(w)
        if got is None:
            text = function_text(ctx, node)
            got = held[w] = any(c in text for c in NEED_SPELLINGS.get(w, (w,)))
        if not got:
            return False
    return True


def _main_script(s: ast.stmt) -> bool:
    """``s`` is an ``if __name__ == "__main__":`` block running a loop at its top."""
    t = s.test if isinstance(s, ast.If) else None
    return isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) \
        and t.left.id == "__name__" and any(isinstance(x, SCRIPT_TOP) for x in s.body)


def function_text(ctx: Context, node: ast.AST) -> str:
    """The source text of a function (the whole file for the module), cached."""
    if isinstance(node, ast.Module):  # its own statements only: not the defs and classes
        return ctx.memo("gt5-text", node, lambda: "\n".join(
            "\n".join(ctx.code_lines[s.lineno - 1:s.end_lineno]) for s in node.body
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))))
    return ctx.memo("gt5-text", node, lambda: "\n".join(
        ctx.code_lines[node.lineno - 1:node.end_lineno]))  # type: ignore[attr-defined]


def related_at(ctx: Context, node: ast.AST, what: str) -> Related:
    """A related place of a finding: ``node``'s line and column, saying ``what``."""
    return Related(ctx.path, node.lineno, what, ctx.column(node))  # type: ignore[attr-defined]
