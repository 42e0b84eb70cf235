"""GT205 in a module's ``forward``: the hidden state a loop of reentrant checkpoints carries,
first made by a frozen embedding (the LoRA + gradient-checkpointing trap)."""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.frozen_attrs import frozen_attr
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

CHECKPOINTS = frozenset({"torch.utils.checkpoint.checkpoint",
                         "torch.utils.checkpoint.checkpoint_sequential"})
EMBEDDINGS = frozenset({"torch.nn.Embedding", "torch.nn.EmbeddingBag"})


def frozen_carried(a: ast.Name, scope: Scope, ctx: Context, int_names: re.Pattern[str]
                   ) -> str | None:
    """Why the checkpoint input ``a`` in a module's ``forward`` cannot require grad: every
    binding of it in the function is the output of a frozen ``nn.Embedding`` of the class on
    integer ids (NOTE [frozen submodules]), what a reentrant checkpoint gave back (it requires
    grad only when an input does), or lies in the other arm of an ``if`` on ``self`` flags
    only (``if self.gradient_checkpointing and self.training:``), which one ``forward``
    never changes. None otherwise."""
    info = ctx.analysis.class_of(scope.node)
    stmt = scope.statement_of(a)
    if info is None or not info.is_module or stmt is None:
        return None
    why = None
    for b in scope.bindings.get(a.id, ()):
        if _flag_arms(scope.node, b.stmt, stmt, ctx):
            continue
        if not isinstance(b.stmt, ast.Assign) or b.value is None:
            return None
        if _checkpointed(b.value, scope, ctx, stmt, 0):
            continue
        v = b.value
        f = v.func if isinstance(v, ast.Call) else None
        attr = f.attr if isinstance(f, ast.Attribute) and dotted(f.value) == "self" else None
        k = info.attr_kind(attr) if attr else None
        args = v.args if isinstance(v, ast.Call) else []
        if k is None or k.cls not in EMBEDDINGS or not args or not all(
                int_names.search((dotted(x) or "").rpartition(".")[2]) for x in args):
            return None
        frozen = frozen_attr(ctx, info.name, attr)  # type: ignore[arg-type]
        if frozen is None:
            return None
        why = (f"`{a.id}` is carried from `self.{attr}`, an embedding frozen at line "
               f"{frozen.lineno}, through reentrant checkpoints")
    return why


def _checkpointed(v: ast.AST, scope: Scope, ctx: Context, at: ast.stmt, depth: int) -> bool:
    """``v`` is a reentrant checkpoint's result (or an element of one bound to a name)."""
    if isinstance(v, ast.Subscript):
        v = v.value
    if isinstance(v, ast.Call):
        if (ctx.qualified_name(v.func) or "") not in CHECKPOINTS:
            return False
        kw = next((k for k in v.keywords if k.arg == "use_reentrant"), None)
        return kw is None or isinstance(kw.value, ast.Constant) and kw.value.value is True
    if not isinstance(v, ast.Name) or depth > 2:
        return False
    bs = scope.bindings.get(v.id, ())
    return bool(bs) and all(
        _flag_arms(scope.node, b.stmt, at, ctx) or isinstance(b.stmt, ast.Assign)
        and b.value is not None and _checkpointed(b.value, scope, ctx, at, depth + 1)
        for b in bs)


def _flag_arms(fn: ast.AST, a: ast.stmt, b: ast.stmt, ctx: Context) -> bool:
    """``a`` and ``b`` sit in different arms of one ``if`` whose test reads only ``self``
    attributes and constants."""
    arms = ctx.memo("gt205-flag-arms", fn, lambda: _arms(fn))
    got_a, got_b = dict(arms.get(id(a), ())), dict(arms.get(id(b), ()))
    return any(k in got_b and got_b[k] != v for k, v in got_a.items())


def _arms_into(out: dict[int, tuple[tuple[int, bool], ...]], body: list[ast.stmt],
               path: tuple[tuple[int, bool], ...]) -> None:
    """:func:`_arms` for the statements of ``body``, under ``path``."""
    for st in body:
        out[id(st)] = path
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(st, ast.If) and _self_only(st.test):
            _arms_into(out, st.body, (*path, (id(st), True)))
            _arms_into(out, st.orelse, (*path, (id(st), False)))
            continue
        for f in ("body", "orelse", "finalbody"):
            _arms_into(out, getattr(st, f, None) or [], path)
        for h in getattr(st, "handlers", ()):
            _arms_into(out, h.body, path)


def _arms(fn: ast.AST) -> dict[int, tuple[tuple[int, bool], ...]]:
    """id(statement) -> the (``if`` on self flags, in its body?) pairs around it, one walk."""
    out: dict[int, tuple[tuple[int, bool], ...]] = {}
    _arms_into(out, getattr(fn, "body", []), ())
    return out


def _self_only(e: ast.expr) -> bool:
    if isinstance(e, ast.BoolOp):
        return all(_self_only(v) for v in e.values)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return _self_only(e.operand)
    if isinstance(e, ast.Attribute):
        return dotted(e.value) == "self"
    return isinstance(e, ast.Constant)
