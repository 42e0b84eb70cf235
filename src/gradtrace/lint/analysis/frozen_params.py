"""Which attribute of a module class of the file holds a weight that never requires grad.

# NOTE [frozen parameters of a class]
``self.w = nn.Parameter(t, requires_grad=False)``, ``self.emb = nn.Embedding.from_pretrained(
m)`` (``freeze=True`` is its default) in ``__init__``, or a submodule every instance of the
class has frozen (:func:`frozen_attrs.frozen_attr`): ``model.parameters()`` then yields a
tensor that does not require grad, and ``torch.autograd.grad(loss, model.parameters())``
raises ``One of the differentiated Tensors does not require grad`` (checked on torch 2.13).
Nothing is known when the file sets ``requires_grad`` to anything but a constant False, or
calls ``requires_grad_()`` with anything but False (a later unfreeze).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.frozen_attrs import frozen_attr
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.nodes import scope_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

PRETRAINED = ("Embedding.from_pretrained", "EmbeddingBag.from_pretrained")


def frozen_parameter(ctx: Context, cls: ClassInfo) -> tuple[str, ast.stmt, str] | None:
    """(attribute, statement that freezes it, how) for the first attribute of ``cls`` whose
    weight never requires grad (NOTE [frozen parameters of a class]); None when none is
    known."""
    if file_unfreezes(ctx):
        return None
    for name, info in cls.attrs.items():
        if info.later or info.buffer or info.method.name != "__init__":
            continue
        k = cls.attr_kind(name)
        what = getattr(k, "what", None)
        v = info.value
        if what == PARAMETER and isinstance(v, ast.Call) and _false(v, "requires_grad"):
            return name, info.stmt, "is built with `requires_grad=False`"
        if isinstance(v, ast.Call) and (ctx.qualified_name(v.func) or "").endswith(PRETRAINED):
            if not any(k.arg == "freeze" for k in v.keywords) and len(v.args) < 2:
                return name, info.stmt, ("is built with `from_pretrained(...)`, whose default "
                                         "`freeze=True` leaves its weight without requires_grad")
            if _true_kw(v, "freeze"):
                return name, info.stmt, "is built with `freeze=True`"
        if what != MODULE:
            continue
        stmt = frozen_attr(ctx, cls.name, name)
        if stmt is not None:
            return name, stmt, f"is frozen on line {stmt.lineno}"
    return None


def _false(call: ast.Call, kw: str) -> bool:
    return any(k.arg == kw and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def _true_kw(call: ast.Call, kw: str) -> bool:
    return any(k.arg == kw and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def file_unfreezes(ctx: Context) -> bool:
    """The file may set ``requires_grad`` back on (once per file): an assignment to
    ``.requires_grad`` of anything but a constant False, a ``requires_grad_()`` with anything
    but False, a ``requires_grad=`` argument that is not a constant (copied from another
    tensor: ``requires_grad=w.requires_grad``). Which parameters are frozen when is then not
    known (GT470, GT714, GT706)."""
    return ctx.memo("file-unfreezes", ctx.tree, lambda: _unfreezes(ctx.tree))


def _unfreezes(tree: ast.AST, name: str | None = None) -> bool:
    """With ``name``: an unfreeze of the parameters of another name (``for p in
    m.parameters(): p.requires_grad = True``) does not count for ``name``."""
    others: set[int] = set()
    if name is not None:
        for lp in walk(tree):
            if isinstance(lp, ast.For) and isinstance(lp.target, ast.Name) \
                    and isinstance(lp.iter, ast.Call) and isinstance(lp.iter.func, ast.Attribute) \
                    and lp.iter.func.attr == "parameters" \
                    and isinstance(lp.iter.func.value, ast.Name) and lp.iter.func.value.id != name:
                others.update(id(n) for b in lp.body for n in walk(b) if isinstance(
                    n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id == lp.target.id)
    for n in walk(tree):
        if isinstance(n, ast.Call) and id(n.func) in others or isinstance(n, ast.Assign) \
                and any(id(t) in others for t in n.targets):
            continue
        if isinstance(n, ast.keyword) and n.arg == "requires_grad" \
                and not isinstance(n.value, ast.Constant):
            return True
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in targets) \
                    and not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                             and n.value.value is False):
                return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "requires_grad_" and not (
                    n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value is False
                    or _false(n, "requires_grad")):
            return True
    return False


def freeze_statement(ctx: Context) -> ast.AST | None:
    """The first place the file freezes a weight (``p.requires_grad = False``,
    ``requires_grad_(False)``, ``nn.Parameter(t, requires_grad=False)``,
    ``nn.Embedding.from_pretrained(m)`` without ``freeze=False``); None when it freezes
    nothing or may set ``requires_grad`` back on."""
    def make() -> ast.AST | None:
        if file_unfreezes(ctx):
            return None
        found: list[ast.AST] = []
        for n in walk(ctx.tree):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute)
                                                 and t.attr == "requires_grad"
                                                 for t in n.targets):
                found.append(n)  # a constant False: anything else unfreezes
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_":
                found.append(n)
            elif isinstance(n, ast.Call) and _false(n, "requires_grad") \
                    and (ctx.qualified_name(n.func) or "").endswith("Parameter"):
                found.append(n)
            elif isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "").endswith(
                    PRETRAINED) and not any(
                        k.arg == "freeze" and not _true_kw(n, "freeze") for k in n.keywords) \
                    and len(n.args) < 2:
                found.append(n)
        return min(found, key=lambda n: (n.lineno, n.col_offset)) if found else None
    return ctx.memo("file-freeze-statement", ctx.tree, make)


# methods of nn.Module that return the module itself (a chain of them keeps its freeze)
_SELF_RETURNING = frozenset({"requires_grad_", "eval", "train", "to", "cuda", "cpu", "float",
                             "half", "double", "bfloat16"})


def frozen_local(ctx: Context, scope: object, callee: str, line: int) -> ast.AST | None:
    """# NOTE [frozen local module]
    ``target = copy.deepcopy(online).requires_grad_(False)`` (a momentum encoder, a teacher),
    or ``target = ...`` then ``target.requires_grad_(False)`` on its own line before ``line``:
    every weight of the module the name holds at ``line`` is frozen (``requires_grad_`` returns
    the module, as ``eval()`` and ``to()`` do), so its output carries a graph only through its
    inputs. The freezing call, or None when not known (the file may unfreeze; another binding
    of the name reaches ``line``)."""
    if "." in callee or file_unfreezes(ctx) and _unfreezes(ctx.tree, callee):
        return None
    got = scope.binding_before(callee, line)  # type: ignore[attr-defined]
    if got is None and scope.node is not ctx.tree \
            and not scope.bindings.get(callee):  # type: ignore[attr-defined]
        # a global: the function runs after the module's statements, so each binding of the
        # module (a notebook builds it again in a later cell) must be frozen after it
        top = ctx.scope(ctx.tree)
        bs = sorted(top.bindings.get(callee, ()), key=lambda b: b.line)
        ends = [b.line for b in bs[1:]] + [10**9]
        found = [_frozen_from(top, b, callee, end) for b, end in zip(bs, ends)]
        return found[-1] if found and all(found) else None
    return _frozen_from(scope, got, callee, line)


def _frozen_from(scope: object, got: object, callee: str, line: int) -> ast.AST | None:
    """The call freezing the module ``got`` binds, in its value or on a statement of its own
    (``m.requires_grad_(False)``, ``_ = m.requires_grad_(False)``) before ``line``."""
    if got is None or not isinstance(got.stmt, ast.Assign):  # type: ignore[attr-defined]
        return None
    st = got.stmt  # type: ignore[attr-defined]
    v = st.value if len(st.targets) == 1 else None
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr in _SELF_RETURNING:
        if _freezes_call(v):
            return v
        v = v.func.value
    for n in scope_nodes(scope.node):  # type: ignore[attr-defined]
        if isinstance(n, (ast.Expr, ast.Assign)) and got.line < n.lineno < line \
                and _freezes_call(n.value) \
                and isinstance(n.value.func.value, ast.Name) \
                and n.value.func.value.id == callee:  # type: ignore[attr-defined]
            return n.value
    return None


def _freezes_call(c: ast.AST) -> bool:
    return isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
        and c.func.attr == "requires_grad_" and len(c.args) == 1 \
        and isinstance(c.args[0], ast.Constant) and c.args[0].value is False
