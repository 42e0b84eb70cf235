"""GT308: a loop over ``named_parameters()`` kept to the names of ``named_buffers()`` (or the
other way round): no name is both, so the loop's work never runs.

# NOTE [names of the other kind]
A module names each parameter and each buffer once, in one namespace: ``register_buffer`` and
``register_parameter`` refuse a name the other already holds. A set collected from one of
``named_parameters()``/``named_buffers()`` therefore holds none of the names the other yields,
and a loop over the other that keeps only names in that set (``if name not in names:
continue``, or a body that is one ``if name in names:``) does nothing. The set is read where it
is bound once (``self.<attr>`` in the class's methods, or a local name of the loop's function)
to a comprehension or ``set(...)``/``list(...)`` over the other iterator; a set updated
anywhere else (``.add``, ``|=``, another assignment) is left alone.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

OTHER = {"named_parameters": "named_buffers", "named_buffers": "named_parameters"}
COMPS = (ast.SetComp, ast.ListComp, ast.DictComp, ast.GeneratorExp)


def _kept_by(loop: ast.For, name: str) -> tuple[ast.expr, bool] | None:
    """(the set, whether it is ``not in``) that the loop's work is kept to by ``name``."""
    body = [s for s in loop.body if not (isinstance(s, ast.Expr)  # a string statement
            and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))]
    first = body[0] if body else None
    if not (isinstance(first, ast.If) and isinstance(first.test, ast.Compare)
            and len(first.test.ops) == 1 and isinstance(first.test.left, ast.Name)
            and first.test.left.id == name):
        return None
    op, names = first.test.ops[0], first.test.comparators[0]
    if isinstance(op, ast.NotIn) and len(first.body) == 1 \
            and isinstance(first.body[0], ast.Continue) and not first.orelse:
        return names, True
    if isinstance(op, ast.In) and len(body) == 1 and not first.orelse:
        return names, False
    return None


def _collected_from(value: ast.expr) -> str | None:
    """``named_parameters``/``named_buffers`` when ``value`` collects the names it yields:
    ``{n for n, _ in m.named_buffers() ...}``, ``set(n for n, _ in ...)``,
    ``[n for n, b in ...]``, ``set(dict(m.named_buffers()))``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in ("set", "list", "frozenset") and len(value.args) == 1:
        value = value.args[0]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id == "dict" and len(value.args) == 1:
        value = value.args[0]
        return value.func.attr if isinstance(value, ast.Call) \
            and isinstance(value.func, ast.Attribute) and value.func.attr in OTHER else None
    if not isinstance(value, COMPS) or len(value.generators) != 1:
        return None
    g = value.generators[0]
    it = g.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in OTHER and isinstance(g.target, ast.Tuple) and g.target.elts
            and isinstance(g.target.elts[0], ast.Name)):
        return None
    key = value.key if isinstance(value, ast.DictComp) else value.elt
    return it.func.attr if isinstance(key, ast.Name) and key.id == g.target.elts[0].id \
        else None


class NamesOfTheOtherKind(Rule):
    """A loop over `named_parameters()` keeps only the names collected from `named_buffers()`
    (or the other way round): no name is both, so the loop's work never runs.

    Why: a module names parameters and buffers in one namespace and never gives a name to both
    (`register_buffer` raises `KeyError: "attribute 'x' already exists"` for a parameter's
    name). A loop over `model.named_parameters()` that skips every name not in a set built
    from `model.named_buffers()` skips them all: an EMA that means to copy or average the
    buffers (BatchNorm's running statistics) leaves them at their initial values
    (lucidrains/ema-pytorch: `get_buffers_iter` walked `named_parameters()`). Iterate the
    kind the set was built from.
    Known limits (NOTE [names of the other kind]): the set is bound once, to a comprehension or `set(...)`/`list(...)` over
    the other iterator, as a local name of the loop's function or an attribute of `self` in
    the class; the loop's first statement is `if name not in names: continue`, or its body is
    one `if name in names:`.
    """

    code = "GT308"
    name = "names-of-the-other-kind"
    message = ("this loop walks `{loop}()` but keeps only names collected from `{other}()` "
               "(line {line}): no parameter and buffer share a name, so nothing passes and the "
               "loop's work never runs; iterate `{other}()`")
    triggers = ("named_",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Shadow(nn.Module):
                def __init__(self, model):
                    super().__init__()
                    self.names = {n for n, b in model.named_buffers() if b.is_floating_point()}
                def stats(self, model):
                    for n, b in model.named_parameters():
                        if n not in self.names:
                            continue
                        yield n, b
            """, at=(7, 20)),
        Good("""
            import torch.nn as nn
            class Shadow(nn.Module):
                def __init__(self, model):
                    super().__init__()
                    self.names = {n for n, b in model.named_buffers() if b.is_floating_point()}
                def stats(self, model):
                    for n, b in model.named_buffers():
                        if n not in self.names:
                            continue
                        yield n, b
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in OTHER and isinstance(node.target, ast.Tuple)
                and node.target.elts and isinstance(node.target.elts[0], ast.Name)):
            return
        kept = _kept_by(node, node.target.elts[0].id)
        spelled = dotted(kept[0]) if kept is not None else None
        if spelled is None:
            return
        made = self._binding(spelled, node, ctx)
        if made is None or _collected_from(made.value) != OTHER[it.func.attr]:
            return
        yield self.report(it, ctx, related=[Related(
            ctx.path, made.lineno, "the names are collected here", ctx.column(made))],
            loop=it.func.attr, other=OTHER[it.func.attr], line=made.lineno)

    @staticmethod
    def _binding(spelled: str, loop: ast.For, ctx: Context) -> ast.Assign | None:
        """The one statement binding ``spelled`` (in the class for ``self.<x>``, else in the
        loop's function), when nothing else changes it."""
        where = ctx.function if not spelled.startswith("self.") else ctx.class_def
        if where is None:
            return None
        binds: list[ast.AST] = []
        for n in walk(where):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(dotted(e) == spelled for t in targets
                       for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])):
                    binds.append(n)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and dotted(n.func.value) == spelled and n.func.attr in (
                        "add", "update", "append", "extend", "__setitem__", "setdefault"):
                binds.append(n)
        one = binds[0] if len(binds) == 1 else None
        return one if isinstance(one, ast.Assign) and len(one.targets) == 1 else None
