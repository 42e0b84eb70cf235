"""GT409 through a copy: the values of a tensor a helper of the file froze are copied into a
trainable Parameter of a module (``self.pos.data.copy_(build_table(...))``).

# NOTE [frozen values copied into a trainable parameter]
``requires_grad`` belongs to the tensor object, not to its values: ``p.data.copy_(src)`` (or
``p.copy_(src)`` under ``no_grad``) gives ``p`` the values of ``src`` and keeps ``p``'s own
flag. When ``src`` is the result of a function of the file that froze what it returns
(``pos = nn.Parameter(table); pos.requires_grad = False; return pos``, or ``return
nn.Parameter(t, requires_grad=False)``: its author wants those values fixed) and ``p`` is a
Parameter the module made trainable (``nn.Parameter(...)`` in ``__init__``, no
``requires_grad=False``), the fixed table trains with the model (MONAI's ``PatchEmbeddingBlock``
with sin-cos position embeddings, PR#7564: the fix freezes ``p`` after the copy). Silent when
the file freezes anything outside that helper (``p`` may be frozen there, by name or in a
loop), when the copied value is not the helper's result (a NumPy table, a checkpoint), and
when the destination is not a Parameter the class builds trainable.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.leaf._tensors import is_false, is_parameter_call, keyword

# methods that give the same values (a copy or a cast) of their receiver
SAME_VALUES = frozenset({"float", "double", "half", "to", "clone", "detach", "contiguous",
                         "type_as", "view_as", "reshape", "view", "squeeze", "unsqueeze",
                         "cpu", "cuda"})


def _freezes(n: ast.AST) -> str | None:
    """The dotted name ``n`` (a statement's node) sets ``requires_grad`` False on."""
    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(
            n.targets[0], ast.Attribute) and n.targets[0].attr == "requires_grad" \
            and is_false(n.value):
        return dotted(n.targets[0].value) or "?"
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
            and n.func.attr == "requires_grad_" and n.args and is_false(n.args[0]):
        return dotted(n.func.value) or "?"
    return None


def _returns_frozen(fn: ast.AST, ctx: Context) -> bool:
    """Every ``return`` of ``fn`` gives a tensor it froze
    (NOTE [frozen values copied into a trainable parameter])."""
    def make() -> bool:
        frozen = {f for n in ast.walk(fn) if (f := _freezes(n)) is not None}
        rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
        if not rets:
            return False
        for r in rets:
            v = r.value
            if isinstance(v, ast.Name) and v.id in frozen:
                continue
            if v is not None and is_parameter_call(v, ctx) and is_false(keyword(
                    v, "requires_grad")):
                continue
            return False
        return True
    return ctx.memo("gt409-returns-frozen", fn, make)


def _source_helper(src: ast.AST, ctx: Context, line: int) -> ast.AST | None:
    """The function of the file whose result ``src`` (through casts and copies, or a name
    bound to it) is, when that function returns a tensor it froze."""
    for _ in range(4):
        while isinstance(src, ast.Call) and isinstance(src.func, ast.Attribute) \
                and src.func.attr in SAME_VALUES:
            src = src.func.value
        if isinstance(src, ast.Name):
            b = ctx.scope().binding_before(src.id, line)
            if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None \
                    or len(b.stmt.targets) != 1:
                return None
            src, line = b.value, b.line
            continue
        break
    if not isinstance(src, ast.Call):
        return None
    fn = called_function(src, ctx.scope(), line)
    if not isinstance(fn, FUNCTION_TYPES) or not _returns_frozen(fn, ctx):
        return None
    return fn


def _trainable_attr(ctx: Context, attr: str) -> ast.Call | None:
    """The ``nn.Parameter(...)`` call the enclosing module class's methods assign to
    ``self.<attr>`` without ``requires_grad=False`` (the only assignment of it)."""
    cls = ctx.class_def
    if cls is None:
        return None
    made = [n.value for n in ast.walk(cls) if isinstance(n, ast.Assign) and len(n.targets) == 1
            and dotted(n.targets[0]) == f"self.{attr}"]
    if len(made) != 1 or not is_parameter_call(made[0], ctx) \
            or keyword(made[0], "requires_grad") is not None:  # type: ignore[arg-type]
        return None
    return made[0]  # type: ignore[return-value]


def frozen_copy(node: ast.Expr, ctx: Context) -> tuple[str, ast.AST, ast.Call] | None:
    """(destination, the freezing helper, the destination's Parameter call) when ``node``
    copies a frozen helper's result into a trainable Parameter of the module
    (NOTE [frozen values copied into a trainable parameter])."""
    c = node.value
    if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "copy_" and len(c.args) == 1):
        return None
    dest = c.func.value
    if isinstance(dest, ast.Attribute) and dest.attr == "data":
        dest = dest.value
    name = dotted(dest)
    if name is None or not name.startswith("self.") or name.count(".") != 1:
        return None
    helper = _source_helper(c.args[0], ctx, node.lineno)
    if helper is None:
        return None
    made = _trainable_attr(ctx, name[5:])
    if made is None:
        return None
    inside = {id(n) for n in ast.walk(helper)}
    if any(_freezes(n) is not None and id(n) not in inside for n in ast.walk(ctx.tree)):
        return None  # the file freezes something else: maybe this parameter
    return name, helper, made
