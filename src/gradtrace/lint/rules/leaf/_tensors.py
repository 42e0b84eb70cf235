"""Shared facts for the GT3xx/GT4xx rules: which expressions make a leaf that requires grad,
which ones turn such a leaf into a non-leaf, and small AST helpers.

All helpers are pure functions of the tree and the file's imports (no mutable state).
"""
from __future__ import annotations

import ast
import bisect
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.array_dtypes import astype_float64
from gradtrace.lint.analysis.on_cuda import moved_already, on_cuda_already
from gradtrace.lint.analysis.optimizer_classes import is_optimizer_call  # noqa: F401 (re-export)
from gradtrace.lint.analysis.weighted_modules import surely_weighted
from gradtrace.lint.code_text import line_starts
from gradtrace.lint.flow import FACTORY_FUNCS, GRAPH, NEW_TENSOR_FUNCS
from gradtrace.lint.rules.leaf._same_place import float32_made, made_of, to_new_layer_weight
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

# factories that accept ``requires_grad=``
GRAD_FACTORIES = FACTORY_FUNCS | {"torch.tensor"}
# methods that return a *new* tensor (a non-leaf when the receiver requires grad), unless they
# are a no-op (same device/dtype): `.to()`, `.cuda()`, `.double()`, ...
COPY_METHODS = frozenset({"to", "cuda", "double", "half", "bfloat16", "type"})
VIEW_METHODS = frozenset({"view", "reshape", "t", "unsqueeze", "squeeze", "expand",
                          "permute", "transpose", "flatten", "clone"})
MOVE_OR_VIEW = COPY_METHODS | VIEW_METHODS
# differentiable operations: applied to a tensor that requires grad they return a non-leaf
DIFF_OPS = frozenset({"sum", "mean", "exp", "log", "pow", "sigmoid", "tanh", "relu", "softmax",
                      "log_softmax", "sin", "cos", "sqrt", "abs", "matmul", "mm", "clamp",
                      "softplus", "gelu", "normalize"})
INT_DTYPES = frozenset({"torch.long", "torch.int", "torch.int64", "torch.int32", "torch.int16",
                        "torch.int8", "torch.uint8", "torch.short", "torch.bool", "torch.uint16",
                        "torch.uint32", "torch.uint64"})
INT_CASTS = frozenset({"long", "int", "short", "bool", "byte", "char"})
INT_TENSOR_TYPES = frozenset({"torch.LongTensor", "torch.IntTensor", "torch.ShortTensor",
                              "torch.ByteTensor", "torch.BoolTensor", "torch.CharTensor"})
# in-place tensor methods that are not updates of the values
NOT_UPDATES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "register_hook",
                         "detach_"})


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword argument ``name`` of ``call``, or None."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def torch_alias(ctx: Context) -> str | None:
    """The local name bound to the ``torch`` module, if any."""
    for local, qual in ctx.imports.aliases.items():
        if qual == "torch":
            return local
    return None


def nn_alias(ctx: Context) -> str | None:
    """A local spelling of ``torch.nn`` (``nn`` or ``torch.nn``), if any."""
    for local, qual in ctx.imports.aliases.items():
        if qual == "torch.nn":
            return local
    t = torch_alias(ctx)
    return f"{t}.nn" if t else None


DATA_CASTS = frozenset({"float", "double", "half", "to", "cpu", "cuda", "clone", "contiguous"})
# in-place fills: they return their receiver, so a new tensor stays a new leaf
FILLS = frozenset({"normal_", "uniform_", "zero_", "fill_", "random_", "exponential_",
                   "log_normal_", "cauchy_", "geometric_"})


def grad_factory(node: ast.AST, ctx: Context) -> ast.Call | None:
    """``torch.randn(..., requires_grad=True)`` (also ``torch.zeros(..).requires_grad_()``)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
        if node.args and not is_true(node.args[0]):
            return None
        inner = func.value
        while isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Mult, ast.Div, ast.Add,
                                                                      ast.Sub)) or \
                isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                (inner.func.attr in DATA_CASTS or inner.func.attr in FILLS):
            # `(torch.randn(n) * std).requires_grad_()`, `torch.from_numpy(a).float()
            # .requires_grad_()`, `torch.empty(k, d).normal_().requires_grad_()`: a new
            # tensor's copies, casts and fills are still new leaves
            inner = inner.left if isinstance(inner, ast.BinOp) else inner.func.value  # type: ignore[union-attr]
        if isinstance(inner, ast.Call) and ctx.call_name(inner) in NEW_TENSOR_FUNCS:
            return node
        if _cut_from_graph(inner):
            return node  # `x.clone().detach().requires_grad_()`: detached, then a new leaf
        return None
    if ctx.call_name(node) in GRAD_FACTORIES and is_true(keyword(node, "requires_grad")):
        return node
    if ctx.call_name(node) == "torch.autograd.Variable" and is_true(keyword(node, "requires_grad")):
        return node
    return None


def _cut_from_graph(inner: ast.AST) -> bool:
    """``x.detach()`` / ``x.clone().detach()`` / ``x.data``: a tensor with no history, so
    ``.requires_grad_()`` on it (after the casts walked above) makes a new leaf that requires
    grad, whatever ``x`` was (pytorch-facts.md#non-leaf-grad)."""
    if isinstance(inner, ast.Attribute) and inner.attr == "data":
        return True
    while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
            and not inner.args and not inner.keywords:
        if inner.func.attr == "detach":
            return True
        if inner.func.attr not in ("clone", "contiguous"):
            return False
        inner = inner.func.value
    return False


def is_parameter_call(node: ast.AST, ctx: Context) -> bool:
    return isinstance(node, ast.Call) and ctx.call_name(node) == "torch.nn.Parameter"


def asks_what_it_has(move: ast.Call, data: ast.AST, ctx: Context) -> bool:
    """``move`` (``.to(d)``, ``.cuda()``, ``.double()``, ...) applied to a tensor made from
    ``data`` asks for what it already has, so it returns that tensor itself (torch returns
    ``self`` when device and dtype already match): ``data`` is the same move with the same
    arguments (``t.to(d)``), or a factory whose ``device=`` / ``dtype=`` give every argument
    of a ``.to(...)`` (``torch.zeros(3, device=d)``)."""
    f = move.func
    if not isinstance(f, ast.Attribute) or f.attr not in COPY_METHODS:
        return False
    sig = [ast.dump(a) for a in move.args] + sorted(ast.dump(k) for k in move.keywords)
    if isinstance(data, ast.Call) and isinstance(data.func, ast.Attribute) \
            and data.func.attr == f.attr and sig == [ast.dump(a) for a in data.args] + \
            sorted(ast.dump(k) for k in data.keywords):
        return True
    if f.attr == "to" and to_new_layer_weight(move, ctx) and (made := made_of(data, move, ctx)) \
            and _made_on_cpu(made[0], ctx) and (made[1] or float32_made(made[0], ctx)):
        return True  # NOTE [move to a new layer's weight]
    if f.attr != "to" or not sig or not isinstance(data, ast.Call) \
            or (ctx.call_name(data) or "") not in NEW_TENSOR_FUNCS:
        return False
    if _to_cpu(move, ctx) and _made_on_cpu(data, ctx):
        return True  # NOTE [move to the CPU it is on]
    given = {ast.dump(k.value) for k in data.keywords if k.arg in ("device", "dtype")}
    wanted = list(move.args) + [k.value for k in move.keywords
                                       if k.arg in ("device", "dtype")]
    return len(wanted) == len(move.args) + len(move.keywords) and \
        all(ast.dump(a) in given for a in wanted)


# NOTE [move to the CPU it is on]: a tensor constructor given no ``device=`` makes its tensor
# on the default device, the CPU unless the file calls ``torch.set_default_device``;
# ``.to("cpu")`` of it asks for the device it has and returns the tensor itself (an
# ``nn.Parameter`` stays one, registered: torch 2.13). A ``*_like`` factory or
# ``torch.as_tensor`` takes the device of its argument, so it does not count.
def _to_cpu(move: ast.Call, ctx: Context) -> bool:
    """``move`` is ``.to("cpu")`` / ``.to(device="cpu")`` / ``.to(torch.device("cpu"))``."""
    given = list(move.args) + [k.value for k in move.keywords if k.arg == "device"]
    if len(given) != 1 or len(move.args) + len(move.keywords) != 1:
        return False
    arg = given[0]
    if isinstance(arg, ast.Call) and ctx.call_name(arg) == "torch.device" and len(arg.args) == 1 \
            and not arg.keywords:
        arg = arg.args[0]
    return isinstance(arg, ast.Constant) and arg.value == "cpu"


def _made_on_cpu(data: ast.Call, ctx: Context) -> bool:
    name = ctx.call_name(data) or ""
    return name not in ("torch.as_tensor",) and not name.endswith("_like") \
        and not any(k.arg in ("device", None) for k in data.keywords) \
        and not ctx.mentions("set_default_device")


def single_assign_of(call: ast.Call, ctx: Context) -> ast.Assign | None:
    """The statement ``target = value`` (one target) whose value is ``call`` or has ``call``
    as an operand of a binary operation (``torch.randn(3) * 0.1``), else None."""
    node = ctx.statement
    if not isinstance(node, ast.Assign) or node.value is not ctx.exprs[0] \
            or len(node.targets) != 1 or not isinstance(node.value, (ast.Call, ast.BinOp)):
        return None
    if call is not node.value and not (isinstance(node.value, ast.BinOp) and call in (
            node.value.left, node.value.right)):
        return None
    return node


def made_non_leaf(node: ast.AST, ctx: Context) -> tuple[ast.Call, str] | None:
    """``torch.randn(.., requires_grad=True).cuda()`` / ``... * scale``: (the factory, how)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        if method == "float" and not node.args:
            f = grad_factory(node.func.value, ctx)
            if f is not None and _float64(f, ctx):
                return f, ".float()"  # float64 -> float32: a copy (`ToCopyBackward0`)
        if method in COPY_METHODS or method in VIEW_METHODS:
            inner = node.func.value
            f = grad_factory(inner, ctx)
            if f is not None and not (method == "cuda" and not node.args and not node.keywords
                                      and _on_cuda_already(f, ctx) or moved_already(node, f, ctx)):
                return f, f".{method}()"
            got = made_non_leaf(inner, ctx)
            if got is not None and method in COPY_METHODS | VIEW_METHODS:
                return got
        return None
    if isinstance(node, ast.BinOp):
        for side in (node.left, node.right):
            f = grad_factory(side, ctx)
            if f is not None:
                return f, "arithmetic"
    return None


def _on_cuda_already(factory: ast.Call, ctx: Context) -> bool:
    """``Variable(noise[:n], requires_grad=True).cuda()`` where every binding of ``noise`` (here
    or at module level) ends in ``.cuda()``: the leaf is already on the current CUDA device,
    and ``.cuda()`` returns it itself (FreeAdversarialTraining's global noise)."""
    if on_cuda_already(factory, ctx.scope(), ctx):
        return True  # NOTE [cuda of what is on cuda], NOTE [handed in on cuda]
    if ctx.call_name(factory) != "torch.autograd.Variable" or not factory.args:
        return False
    data = factory.args[0]
    while isinstance(data, ast.Subscript):
        data = data.value
    if not isinstance(data, ast.Name):
        return False
    line = factory.lineno
    values = [b.value for sc in (ctx.scope(), ctx.scope(ctx.tree))
              for b in sc.bindings_before(data.id, line)]
    return bool(values) and all(
        isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "cuda"
        and not v.args and not v.keywords for v in values)


NUMPY_MAKERS = frozenset({"numpy.array", "numpy.asarray", "numpy.zeros", "numpy.ones",
                          "numpy.linspace", "numpy.random.rand", "numpy.random.randn",
                          "numpy.random.uniform", "numpy.random.normal", "numpy.eye",
                          "numpy.full", "numpy.loadtxt"})


def _float64(factory: ast.Call, ctx: Context) -> bool:
    """Whether the tensor ``factory`` makes is float64: ``dtype=torch.float64`` or data from a
    NumPy array made without a dtype (NumPy's default float is float64; ``torch.tensor`` and
    ``torch.from_numpy`` keep it)."""
    inner = factory
    if isinstance(factory.func, ast.Attribute) and factory.func.attr == "requires_grad_" \
            and isinstance(factory.func.value, ast.Call):
        inner = factory.func.value
    dtype = keyword(inner, "dtype")
    if dtype is not None:
        return ctx.qualified_name(dtype) in ("torch.float64", "torch.double")
    if not inner.args or ctx.call_name(inner) not in ("torch.tensor", "torch.from_numpy",
                                                      "torch.as_tensor"):
        return False
    data = inner.args[0]
    if isinstance(data, ast.Name):  # `a = np.random.rand(3)` earlier in the function
        b = ctx.scope().binding_before(data.id, inner.lineno)
        data = b.value if b is not None and b.value is not None else data
    cast = astype_float64(data, ctx)  # `np.random.rand(3, 4).astype(np.float64)`
    if cast is not None:
        return cast
    if not isinstance(data, ast.Call) or ctx.call_name(data) not in NUMPY_MAKERS \
            or keyword(data, "dtype") is not None:
        return False
    lits = [n for n in walk(data) if isinstance(n, ast.Constant)
            and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)]
    # `np.array([1.0, 2.0])` is float64, `np.array([1, 2])` int64 (then GT304's business)
    return ctx.call_name(data) != "numpy.array" and ctx.call_name(data) != "numpy.asarray" \
        or any(isinstance(n.value, float) for n in lits)


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


def reads_grad_of(node: ast.AST, name: str) -> bool:
    """Whether ``node`` contains ``<name>.grad``."""
    for n in walk(node):
        if isinstance(n, ast.Attribute) and n.attr == "grad" and dotted(n.value) == name:
            return True
    return False


HISTORYLESS = frozenset({"grad", "data", "detach", "detach_", "shape", "dtype", "device"})


def reads_with_history(node: ast.AST, name: str) -> bool:
    """Whether ``node`` reads ``name`` other than through an attribute that carries no
    history (``name.grad``, ``name.detach()``, ``name.data``, ``name.shape``): ``x.detach() -
    lr * x.grad`` is made of tensors that require no grad, a new leaf."""
    cut = {id(n.value) for n in walk(node)
           if isinstance(n, ast.Attribute) and n.attr in HISTORYLESS}
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in cut
               for n in walk(node))


def grad_leaf_binding(scope: Scope, name: str, line: int) -> Binding | None:
    """The binding making ``name`` a leaf that requires grad, if it still holds at ``line``."""
    ctx = scope.ctx
    b = None
    for cand in scope.bindings.get(name, ()):
        if cand.line >= line:
            break
        if not isinstance(cand.stmt, ast.AugAssign):  # in-place: same tensor
            b = cand
    if b is None or b.value is None:
        return None
    if grad_factory(b.value, ctx) is not None or (
            is_parameter_call(b.value, ctx) and not is_false(_param_flag(b.value))):
        return b
    if isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Name) \
            and b.value.func.id in leaf_helpers(ctx):
        return b  # `weights = init_params(...)`: a same-file helper returning a grad leaf
    return None


def leaf_helpers(ctx: Context) -> frozenset[str]:
    """Top-level functions of the file whose every ``return`` is a new leaf that requires
    grad (``return torch.randn(n).requires_grad_()``)."""
    def make() -> frozenset[str]:
        out = set()
        for fn in ctx.tree.body:
            if not isinstance(fn, ast.FunctionDef) or "requires_grad" not in ctx.code_of(fn):
                continue
            rets = [r.value for r in of_types(fn, (ast.Return,))]
            if rets and all(r is not None and grad_factory(r, ctx) is not None for r in rets):
                out.add(fn.name)
        return frozenset(out)
    return ctx.memo("gt3-leaf-helpers", ctx.tree, make)


def _param_flag(call: ast.AST) -> ast.expr | None:
    if not isinstance(call, ast.Call):
        return None
    if len(call.args) > 1:
        return call.args[1]
    return keyword(call, "requires_grad")


def derived_from_grad_leaf(scope: Scope, expr: ast.AST, line: int) -> str | None:
    """The grad-leaf name ``expr`` is computed from (``w * 2``, ``w.cuda()``), else None.

    Only direct computations count: arithmetic and tensor methods on a name bound in this
    scope to ``torch.*(..., requires_grad=True)`` or ``nn.Parameter(...)``.
    """
    if isinstance(expr, ast.BinOp):
        for side in (expr.left, expr.right):
            if isinstance(side, ast.Name) and grad_leaf_binding(scope, side.id, line):
                return side.id
            got = derived_from_grad_leaf(scope, side, line)
            if got:
                return got
        return None
    if isinstance(expr, ast.Call) and expr.args and \
            (scope.ctx.call_name(expr) or "").startswith(("torch.", "torch.nn.functional.")) \
            and (scope.ctx.call_name(expr) or "").rpartition(".")[2] in DIFF_OPS:
        arg = expr.args[0]  # `torch.sigmoid(w)`, `F.relu(w * 2)`
        if isinstance(arg, ast.Name) and grad_leaf_binding(scope, arg.id, line):
            return arg.id
        return derived_from_grad_leaf(scope, arg, line)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and (expr.func.attr in COPY_METHODS or expr.func.attr in VIEW_METHODS
                 or expr.func.attr in DIFF_OPS):
        recv = expr.func.value
        if isinstance(recv, ast.Name) and grad_leaf_binding(scope, recv.id, line):
            return recv.id
        return derived_from_grad_leaf(scope, recv, line)
    return None


def non_leaf_origin(scope: Scope, name: str, line: int) -> tuple[Binding, str] | None:
    """Why ``name`` holds a non-leaf at ``line``: (its binding, a short reason), else None."""
    b = scope.binding_before(name, line)
    if b is None or b.value is None or b.no_grad:
        return None
    ctx = scope.ctx
    if made_non_leaf(b.value, ctx) is not None:
        return b, "made-non-leaf"
    if reads_grad_of(b.value, name) and reads_with_history(b.value, name):
        return b, "rebound"
    src = derived_from_grad_leaf(scope, b.value, b.line)
    if src is not None:
        return b, f"computed from `{src}`"
    if b.kind == GRAPH and _from_module_call(b.value, scope):
        return b, "a model output"
    if b.kind is None and isinstance(b.value, ast.Call) \
            and surely_weighted(b.value.func, scope, b.line):
        return b, "the output of a layer with weights"  # NOTE [weighted modules]
    return None


def _from_module_call(expr: ast.AST, scope: Scope) -> bool:
    """``model(x)`` (a module bound in this scope) or ``criterion(out, y)`` with ``out`` such."""
    from gradtrace.lint.flow import MODULE

    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        b = scope.binding_before(expr.func.id, expr.lineno)
        return b is not None and b.kind == MODULE and b.value is not None
    return False


def optimizer_param_exprs(call: ast.Call, scope: Scope | None = None) -> Iterator[ast.expr]:
    """The tensor expressions listed in an optimizer's first argument (lists and dicts; with a
    scope, also the literal a name like ``params = [w, b]`` was bound to)."""
    first = call.args[0] if call.args else keyword(call, "params")
    if first is None:
        return
    stack = [first]
    seen: set[int] = set()
    while stack:
        e = stack.pop()
        if scope is not None and isinstance(e, ast.Name) and id(e) not in seen:
            seen.add(id(e))
            b = scope.binding_before(e.id, call.lineno)
            if b is not None and isinstance(b.value, (ast.List, ast.Tuple)) \
                    and not isinstance(b.stmt, ast.AugAssign):
                stack.extend(b.value.elts)
                continue
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            stack.extend(e.elts)
        elif isinstance(e, ast.Dict):
            for k, v in zip(e.keys, e.values):
                if isinstance(k, ast.Constant) and k.value == "params":
                    stack.append(v)
        else:
            yield e


COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)


def stmt_lines(s: ast.stmt) -> range:
    return range(s.lineno, (s.end_lineno or s.lineno) + 1)


def node_mentions(ctx: Context, node: ast.AST, *words: str) -> bool:
    """Whether the source lines of ``node`` contain one of ``words`` (no copying; cached)."""
    return ctx.memo("gt3-mentions:" + "|".join(words), node,
                    lambda: _node_mentions(ctx, node, words))


def _node_mentions(ctx: Context, node: ast.AST, words: tuple[str, ...]) -> bool:
    starts = line_starts(ctx)
    a = starts[min(node.lineno, len(starts) - 1)]  # type: ignore[attr-defined]
    end = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    b = starts[min(end + 1, len(starts) - 1)]
    text = ctx.code
    return any(text.find(w, a, b) != -1 for w in words)


def mention_lines(ctx: Context, *words: str) -> list[int]:
    """The sorted lines of the code holding one of ``words`` (no word spans a line): a node
    :func:`node_mentions` one of them exactly when its lines hold one of these (one scan of
    the file per word instead of one per node: cached)."""
    def make() -> list[int]:
        starts, text = line_starts(ctx), ctx.code
        found = set()
        for w in words:
            p = text.find(w)
            while p != -1:
                line = bisect.bisect_right(starts, p) - 1
                found.add(line)
                nxt = starts[line + 1] if line + 1 < len(starts) else len(text)
                if nxt <= p:
                    break
                p = text.find(w, nxt)  # (one hit a line is enough: on from the next line)
        return sorted(found)
    return ctx.memo("gt3-mention-lines:" + "|".join(words), ctx.tree, make)


def scope_mentions(ctx: Context, *words: str) -> bool:
    """Cheap pre-check: does the enclosing function's (or the file's) text contain a word?"""
    fn = ctx.function
    if fn is None:
        return ctx.mentions(*words)
    return node_mentions(ctx, fn, *words)
