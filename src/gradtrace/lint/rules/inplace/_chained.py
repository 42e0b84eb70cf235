"""GT602's op chains: an in-place method called straight on the result of an op that saves
its output (``d.norm(dim=-1).div_(2)``, ``(x - y).exp().mul_(2)``), the result never named.

# NOTE [chained saved output]
The named form (``p = torch.sigmoid(h); p.mul_(2)``) is found from the producer's binding;
a chain has no name to follow, so it is read at the in-place call itself: its receiver,
through views, is a call of an op that saves its output (the ``sig``/``relu`` families of
:data:`._ops.SAVED_OUT`, and the norms: ``Tensor.norm``, ``torch.norm``,
``torch.linalg.norm``/``vector_norm`` save their result whatever ``p`` and ``dim``; each
checked on torch 2.13: the backward raises "... modified by an inplace operation"). The op
must be a tensor op (a method on a value that is not ``self``, or a ``torch.*`` function: a
``self.norm(x)`` is a layer), its input must carry a graph and the statement must be
differentiated (a backward after it, a loss, a forward, a caller's gradient call).
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.lint.analysis.kinds import PARAMETER, TENSOR
from gradtrace.lint.analysis.write_spelling import aliased_inplace, body_may_write
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rules.inplace._ops import SAVED_OUT, VIEW_METHODS
from gradtrace.lint.rules.inplace._passed_graph import differentiated_by_caller
from gradtrace.lint.rules.numerics._ops import carries_graph, in_training

NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream",
                        "register_hook"})
NORMS = frozenset({"norm", "vector_norm"})
TORCH_NORMS = frozenset({"torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm"})


def chained_write(call: ast.Call, ctx: Context) -> tuple[ast.Call, str] | None:
    """(the op call, its name) when ``call`` is an in-place method on the op's unnamed
    result (NOTE [chained saved output]) and the write is differentiated."""
    f = call.func
    if not isinstance(f, ast.Attribute) or not f.attr.endswith("_") or f.attr.startswith("_") \
            or f.attr in NOT_WRITES:
        return None
    recv = f.value
    while isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
            and recv.func.attr in VIEW_METHODS:
        recv = recv.func.value
    if not isinstance(recv, ast.Call):
        return None
    got = _op(recv, ctx)
    if got is None:
        return None
    op, operand = got
    if op in ("relu", "relu_", "leaky_relu", "leaky_relu_", "elu", "elu_") \
            and f.attr in ("add_", "sub_"):
        return None  # GT603's `+=` family; `relu(x).add_(1)` is reported there when named
    if ctx.grad_disabled is not None or not carries_graph(ctx, operand, recv):
        return None
    stmt = ctx.statement
    if stmt is None or not (in_training(ctx, stmt) or differentiated_by_caller(ctx, ctx.function)):
        return None
    return recv, op


def _op(c: ast.Call, ctx: Context) -> tuple[str, ast.expr] | None:
    """(op name, its input) of a saved-output tensor op call, else None."""
    f = c.func
    q = ctx.qualified_name(f) or ""
    if q.startswith("torch."):
        last = q.rpartition(".")[2]
        if (SAVED_OUT.get(last) or q in TORCH_NORMS) and c.args \
                and not isinstance(c.args[0], ast.Starred) \
                and (q in TORCH_NORMS or q.count(".") == 1
                     or q.startswith("torch.nn.functional.")):
            return last, c.args[0]
        return None
    if not isinstance(f, ast.Attribute) or not (f.attr in SAVED_OUT or f.attr in NORMS):
        return None
    recv = f.value
    if isinstance(recv, ast.Name) and (recv.id == "self" or ctx.qualified_name(recv)):
        return None  # `self.norm(x)` (a layer), `F.relu(x)` resolved above, a module alias
    if isinstance(recv, ast.Attribute) and not isinstance(recv.value, (ast.Call, ast.Subscript)):
        k = ctx.analysis.kind(recv, None, c.lineno)
        if k is None or k.what not in (TENSOR, PARAMETER):
            return None  # `self.ln.norm(...)`: not surely a tensor
    return f.attr, recv


def nested_layer_writes(s: ast.stmt, modules: Any) -> list[tuple[ast.Call, tuple]]:
    """(the inner module call, the write) for ``self.dropout(self.mlp(x))`` in ``s``: an
    in-place layer attribute (``nn.Dropout(p, inplace=True)``, ``nn.ReLU(inplace=True)``:
    :meth:`._ops._LazyModules.inplace`) called straight on another ``self.<attr>(...)``
    module call's unnamed result (torchgeo's LTAE: the MLP ends in a ReLU)."""
    out: list[tuple[ast.Call, tuple]] = []
    if not isinstance(s, (ast.Assign, ast.Expr, ast.Return, ast.AugAssign, ast.AnnAssign)):
        return out  # simple statements only: a compound one's body is visited on its own
    for n in ast.walk(s):
        if not (isinstance(n, ast.Call) and len(n.args) == 1 and not n.keywords
                and isinstance(n.args[0], ast.Call)):
            continue
        inner = n.args[0]
        f, g = n.func, inner.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "self" and isinstance(g, ast.Attribute) \
                and isinstance(g.value, ast.Name) and g.value.id == "self" \
                and modules.inplace("self." + f.attr):
            out.append((inner, ("<result>", "method", n)))
    return out


def dropout_flag_site(target: ast.AST, ctx: Context) -> ast.Call | None:
    """The in-place layer call of ``__init__`` that built the layer the write
    ``self.<attr>(h)`` calls, or that opens the ``nn.Sequential`` built there (``self.e2 =
    nn.Sequential(nn.LeakyReLU(0.2, inplace=True), conv, ...)``): the in-place flag there is
    the line to change (``inplace`` only saves memory)."""
    from gradtrace.lint.rules.inplace._ops import _first_layer, _init_value, _writes_input
    if not (isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute)
            and isinstance(target.func.value, ast.Name) and target.func.value.id == "self"):
        return None
    for info in ctx.analysis.classes.values():
        node = info.node
        if info.is_module and node.lineno <= target.lineno <= (node.end_lineno or 0):
            v = _init_value(node, target.func.attr, ctx)
            if v is not None and "Dropout" in (ctx.qualified_name(v.func) or "") \
                    and _writes_input(v, ctx):
                return v
            first = _first_layer(v, ctx) if v is not None else None
            if first is not None and first is not v and _writes_input(first, ctx):
                return first
    return None


def init_says_inplace(cls: ast.ClassDef, ctx: Context) -> bool:
    """The class's ``__init__`` spells ``inplace=`` (once per class)."""
    def make() -> bool:
        init = next((f for f in cls.body if isinstance(f, FUNCTION_TYPES)
                     and f.name == "__init__"), None)
        return init is not None and "inplace" in "\n".join(
            ctx.code_lines[init.lineno - 1:init.end_lineno or init.lineno])
    return ctx.memo("gt6-init-inplace", cls, make)


def may_write(cls: ast.ClassDef, fn: ast.AST, ctx: Context, modules: Any) -> bool:
    """Whether the method ``fn`` of ``cls`` may write in place (NOTE [write spelling]): its
    body spells a write, or a write need not be spelt in the class: a layer ``__init__`` may
    build in place (it spells ``inplace`` or ``True``: ``modules``'s own gate, then
    ``self.act(x)`` writes), or a torch in-place function imported under another name. The
    class's part is found once per class, while ``_class_writes._class_pairs`` reads it (once per
    class and file): the imports of that moment."""
    return body_may_write(ctx, fn) or ctx.memo("gt6-unspelt", cls, lambda: init_says_inplace(
        cls, ctx) or modules._init_says_true() or aliased_inplace(ctx))
