"""GT712: an `argparse` option with `type=bool` decides how gradients are taken."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.rule import Bad, Good, Rule

# keywords whose value decides what autograd records or keeps
GRAD_KEYWORDS = frozenset({"create_graph", "retain_graph", "requires_grad", "allow_unused"})
# calls whose argument (or whose presence in one branch) decides it
GRAD_CALLS = frozenset({"requires_grad_", "set_grad_enabled", "detach", "detach_", "no_grad",
                        "enable_grad", "inference_mode"})
MAX_HOPS = 2


class BoolFlagDecidesGradients(Rule):
    """An `argparse` option declared with `type=bool` decides how gradients are taken
    (`create_graph=`, `requires_grad`, a `no_grad`/`detach` branch).

    Why: `type=bool` calls `bool()` on the command-line string, and every non-empty string
    is true: `--first-order False` parses as `True`. The flag cannot be turned off, so the
    branch it guards always runs: MAML's meta-gradient silently drops its second-order
    terms, a backbone meant to be trained stays frozen (cnguyen10/few_shot_meta_learning#6,
    checked on torch 2.13). Use `action="store_true"` (or a converter that reads
    `"false"`/`"0"`).
    Known limits: the option's value must be read as `<args>.<dest>` (directly, through one
    name, one attribute or one dict-literal entry it is copied into) in a keyword among
    `create_graph`/`retain_graph`/`requires_grad`/`allow_unused`, in a `requires_grad_()`,
    `set_grad_enabled()` call, or in the test of an `if` whose branches do one of these.
    """

    code = "GT712"
    name = "bool-flag-decides-gradients"
    message = ("`{option}` is parsed with `type=bool`: any non-empty string gives True "
               "(`{option} False` included), so `{read}` (line {line}), which decides how "
               "gradients are taken, cannot be set False from the command line; use "
               "`action='store_true'`")
    triggers = ("type=bool",)
    gate_statements = True
    examples = [
        Bad("""
            import argparse
            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--first-order", type=bool, default=False)
            args = parser.parse_args()

            def inner_grads(loss, params):
                return torch.autograd.grad(loss, params, create_graph=not args.first_order)
            """, at=(5, 0)),
        Good("""
            import argparse
            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--first-order", action="store_true")
            parser.add_argument("--verbose", type=bool, default=False)
            args = parser.parse_args()

            def inner_grads(loss, params):
                if args.verbose:
                    print(loss.item())
                return torch.autograd.grad(loss, params, create_graph=not args.first_order)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "add_argument") or not any(
                k.arg == "type" and isinstance(k.value, ast.Name) and k.value.id == "bool"
                for k in node.keywords):
            return
        dest = _dest(node)
        if dest is None:
            return
        parents = file_parents(ctx)
        for read in _reads(ctx, parents, dest):
            if _decides(read, parents):
                yield self.report(node, ctx, related=[Related(
                    ctx.path, read.lineno, "the flag decides how gradients are taken here",
                    ctx.column(read))], option=_option(node), read=ctx.source(read),
                    line=read.lineno)
                return


def _dest(call: ast.Call) -> str | None:
    for k in call.keywords:
        if k.arg == "dest":
            return k.value.value if isinstance(k.value, ast.Constant) \
                and isinstance(k.value.value, str) else None
    names = [a.value for a in call.args if isinstance(a, ast.Constant)
             and isinstance(a.value, str)]
    longs = [n for n in names if n.startswith("--")]
    name = (longs or names or [None])[0]
    return name.lstrip("-").replace("-", "_") if name else None


def _option(call: ast.Call) -> str:
    names = [a.value for a in call.args if isinstance(a, ast.Constant)
             and isinstance(a.value, str)]
    return names[0] if names else "?"


def _reads(ctx: Context, parents: dict[int, ast.AST], dest: str) -> list[ast.expr]:
    """Every read of ``<name>.<dest>`` in the file, and of what it is copied into: a name
    (``fo = args.first_order``), an attribute (``self.fo = ...``), an entry of a dict literal
    (``{'first_order': args.first_order}`` read as ``config['first_order']``)."""
    out: list[ast.expr] = []
    todo: list[tuple[str, str, int]] = [("attr", dest, 0)]
    seen: set[tuple[str, str]] = set()
    while todo:
        how, key, hops = todo.pop()
        if (how, key) in seen:
            continue
        seen.add((how, key))
        for n in walk(ctx.tree):
            hit = how == "attr" and isinstance(n, ast.Attribute) and n.attr == key \
                and isinstance(n.ctx, ast.Load) \
                or how == "name" and isinstance(n, ast.Name) and n.id == key \
                and isinstance(n.ctx, ast.Load) \
                or how == "key" and isinstance(n, ast.Subscript) \
                and isinstance(n.slice, ast.Constant) and n.slice.value == key \
                and isinstance(n.ctx, ast.Load)
            if not hit:
                continue
            out.append(n)  # type: ignore[arg-type]
            if hops < MAX_HOPS:
                todo.extend((h, k, hops + 1) for h, k in _copies(n, parents))
    return out


def _copies(n: ast.AST, parents: dict[int, ast.AST]) -> list[tuple[str, str]]:
    p = parents.get(id(n))
    if isinstance(p, ast.Assign) and p.value is n and len(p.targets) == 1:
        t = p.targets[0]
        if isinstance(t, ast.Name):
            return [("name", t.id)]
        if isinstance(t, ast.Attribute):
            return [("attr", t.attr)]
    if isinstance(p, ast.Dict):
        return [("key", k.value) for k, v in zip(p.keys, p.values) if v is n
                and isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def _decides(read: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """The read is a gradient keyword's value, an argument of a grad-mode call, or in the
    test of an ``if`` whose branches take gradients differently."""
    n: ast.AST | None = read
    while n is not None and not isinstance(n, ast.stmt):
        p = parents.get(id(n))
        if isinstance(p, ast.keyword) and p.arg in GRAD_KEYWORDS:
            return True
        if isinstance(p, ast.Call) and n in p.args and (dotted(p.func) or "").rpartition(
                ".")[2] in GRAD_CALLS:
            return True
        if isinstance(p, (ast.If, ast.IfExp, ast.While)) and p.test is n:
            return any(_grad_op(x) for part in (p.body, p.orelse)
                       for x in (part if isinstance(part, list) else [part]))
        n = p
    return False


def _grad_op(node: ast.AST) -> bool:
    for n in walk(node):
        if isinstance(n, ast.keyword) and n.arg in GRAD_KEYWORDS:
            return True
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rpartition(".")[2] in GRAD_CALLS:
            return True
        if isinstance(n, ast.Attribute) and n.attr == "requires_grad" \
                and isinstance(n.ctx, ast.Store):
            return True
    return False
