"""GT405: a `parameters()` generator iterated before the optimizer receives it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.settings import exclusive_settings
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

CONSUMERS = frozenset({"list", "tuple", "set", "sum", "sorted", "any", "all", "max", "min",
                       "len", "enumerate", "zip", "map", "filter", "dict", "next"})


def _consumer(stmt: ast.stmt, name: str, ctx: Context) -> ast.AST | None:
    """The node in ``stmt`` that iterates over ``name`` (a for, comprehension, list(...), an
    earlier optimizer)."""
    for n in walk(stmt):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) \
                and n.args[0].id == name and is_optimizer_call(n, ctx):
            return n
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and isinstance(n.iter, ast.Name) and n.iter.id == name:
            return n.iter
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in CONSUMERS \
                and any(isinstance(a, ast.Name) and a.id == name for a in n.args):
            return n
        if isinstance(n, ast.Starred) and isinstance(n.value, ast.Name) and n.value.id == name:
            return n
    return None


def _given_names(arg: ast.expr) -> list[ast.Name]:
    """The names an optimizer's first argument hands it as parameters: the argument itself, or
    the ``"params"`` entry of each group in a list or tuple of groups (``[{"params": enc_params,
    "lr": 1e-4}, dict(params=head_params)]``)."""
    if isinstance(arg, ast.Name):
        return [arg]
    if not isinstance(arg, (ast.List, ast.Tuple)):
        return []
    got = (_stored_at(g, "params") for g in arg.elts)
    return [g for g in got if isinstance(g, ast.Name)]


def _stored_at(holder: ast.AST | None, key: object) -> ast.expr | None:
    """The value stored under ``key`` by ``dict(key=v)`` or ``{key: v}``."""
    if isinstance(holder, ast.Call) and isinstance(holder.func, ast.Name) \
            and holder.func.id == "dict" and not holder.args:
        return next((k.value for k in holder.keywords if k.arg == key), None)
    if isinstance(holder, ast.Dict):
        return next((v for k, v in zip(holder.keys, holder.values)
                     if isinstance(k, ast.Constant) and k.value == key), None)
    return None


def _consumer_of(stmt: ast.stmt, key: str, ctx: Context) -> ast.AST | None:
    """The node in ``stmt`` that iterates over the subscript spelled ``key``."""
    for n in walk(stmt):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and ast.dump(n.iter) == key:
            return n.iter
        if isinstance(n, ast.Call) and n.args and ast.dump(n.args[0]) == key and (
                isinstance(n.func, ast.Name) and n.func.id in CONSUMERS
                or is_optimizer_call(n, ctx)):
            return n
    return None


class ParametersGeneratorConsumed(Rule):
    """The `model.parameters()` generator is iterated before it reaches the optimizer.

    Why: `parameters()` returns a one-shot generator. Counting or logging through it
    (`sum(p.numel() for p in params)`, `list(params)`) exhausts it, so
    `torch.optim.SGD(params)` gets nothing and raises `ValueError: optimizer got an empty
    parameter list` (pytorch-facts.md#optimizer-identity), or silently fewer parameters when it
    was only
    partly consumed. Make a list once: `params = list(model.parameters())`.
    The generator may be handed as a group's `"params"` entry (`AdamW([{"params": params,
    "lr": 1e-4}, ...])`): that group is empty.
    Known limits: the generator, its consumer and the optimizer must be in one function; two
    optimizers in different branches of one `if` never both receive it.
    """

    code = "GT405"
    gate_statements = True
    name = "parameters-generator-consumed"
    message = ("`{name}` (a one-shot generator from `{src}`) is {how}, before the optimizer "
               "at line {opt_line} receives it: the optimizer gets an empty or partial "
               "parameter list")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            params = model.parameters()
            print("parameters:", sum(p.numel() for p in params))
            opt = torch.optim.SGD(params, lr=0.1)
            """, at=(3, 0)),
        Bad("""
            import torch
            params = model.parameters()
            opt_main = torch.optim.SGD(params, lr=0.1)
            opt_swa = torch.optim.SGD(params, lr=0.05)
            """, at=(3, 0)),
        Good("""
            import torch
            params = list(model.parameters())
            print("parameters:", sum(p.numel() for p in params))
            opt = torch.optim.SGD(params, lr=0.1)
            """),
        Good("""
            import torch
            params = model.parameters()
            opt = torch.optim.SGD(params, lr=0.1)
            print(sum(p.numel() for p in model.parameters()))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if node.args and isinstance(node.args[0], ast.Subscript) \
                and is_optimizer_call(node, ctx):
            yield from self._held(node, node.args[0], ctx)
            return
        if not node.args or not is_optimizer_call(node, ctx):
            return
        for given in _given_names(node.args[0]):
            found = list(self._consumed(node, given.id, ctx))
            yield from found
            if found:
                return

    def _consumed(self, node: ast.Call, name: str, ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope()
        b = scope.binding_before(name, node.lineno)
        if b is None or not self._generator(b.value, ctx):
            return
        opt_stmt = scope.statement_of(node)
        for s in scope.stmts:
            if b.line < s.lineno < node.lineno and s is not opt_stmt and not isinstance(
                    s, (ast.If, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)) \
                    and not (opt_stmt is not None and (scope.exclusive(s, opt_stmt)
                                                       or exclusive_settings(scope, s, opt_stmt))):
                c = _consumer(s, name, ctx)
                if c is not None:
                    related = [Related(ctx.path, node.lineno, "the optimizer receives the "
                                       "exhausted generator here")]
                    yield self.report(s, ctx, related=related, name=name,
                                      src=ctx.source(b.value), opt_line=node.lineno,
                                      how="consumed here")
                    return

    def _held(self, node: ast.Call, sub: ast.Subscript, ctx: Context) -> Iterator[Finding]:
        """``holder = dict(params=model.parameters())``, a loop over ``holder["params"]``, then
        ``SGD(holder["params"])``: the generator is stored in a container, where ``list(...)``
        belongs; reported at the statement that stores it."""
        if not isinstance(sub.value, ast.Name) or not isinstance(sub.slice, ast.Constant):
            return
        scope = ctx.scope()
        b = scope.binding_before(sub.value.id, node.lineno)
        stored = _stored_at(b.value if b is not None else None, sub.slice.value)
        if stored is None or not self._generator(stored, ctx):
            return
        key = ast.dump(sub)
        opt_stmt = scope.statement_of(node)
        for s in scope.stmts:
            if not (b.line < s.lineno < node.lineno) or s is opt_stmt or isinstance(  # type: ignore[union-attr]
                    s, (ast.If, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)) \
                    or (opt_stmt is not None and (scope.exclusive(s, opt_stmt)
                                                  or exclusive_settings(scope, s, opt_stmt))):
                continue
            c = _consumer_of(s, key, ctx)
            if c is not None:
                yield self.report(b.stmt, ctx, related=[  # type: ignore[union-attr]
                    Related(ctx.path, c.lineno, "it is iterated here, which exhausts it",
                            ctx.column(c)),
                    Related(ctx.path, node.lineno, "the optimizer receives the exhausted "
                            "generator here", ctx.column(node))],
                    name=ctx.source(sub), src=ctx.source(stored), opt_line=node.lineno,
                    how=f"stored here and iterated at line {c.lineno}")
                return

    @staticmethod
    def _generator(value: ast.AST | None, ctx: Context) -> bool:
        if not isinstance(value, ast.Call):
            return False
        f = value.func
        if isinstance(f, ast.Attribute) and f.attr in ("parameters", "named_parameters"):
            return True
        q = ctx.call_name(value) or ""
        return q in ("filter", "map", "itertools.chain") and any(
            isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute)
            and a.func.attr in ("parameters", "named_parameters") for a in value.args)
