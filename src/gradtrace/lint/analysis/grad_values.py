"""Which tensors surely require grad where they are read, and which parameters reach NumPy.

# NOTE [values that require grad]
Stricter than the tracers of :mod:`.origins` and :mod:`.grad_sources` (where an unknown value
counts as live): a value *requires grad* only when the code shows where its gradient comes
from, every step made with grad enabled:
- the call of a module of the file or of a ``torch.nn`` layer that holds weights (``net(x)``,
  ``self.head(feat)``, ``nn.Linear(3, 2)(x)``: its class, read by the analysis layer, builds an
  ``nn.Parameter`` or a weighted ``torch.nn`` layer);
- a Parameter (``emb.weight`` of a weighted ``torch.nn`` layer, ``nn.Parameter(t)``,
  ``self.W`` made with one) or a factory
  given ``requires_grad=True``;
- an op on one of those that keeps the graph: an arithmetic operator, a ``torch.*`` function,
  a subscript or a tensor method of :data:`KEEPS` (``.cpu()``, ``.float()``, ``.view(...)``).
A name is its last binding (a global read in a function, its module-level one); an element
unpacked from a tuple literal, or from the call of a module class of the file whose every
``forward`` return is a tuple of that length (``z, mu, var = encoder(x)``), is followed; a
binding made under grad-off, a loop target, any other unpacking, a helper's result: not known. A file that
freezes anything (``requires_grad = False``, ``requires_grad_(False)``) is left alone: which
weights still train is a run-time fact there.

A parameter *reaches NumPy* when the function hands it (through :data:`KEEPS`) to a NumPy
sink, or passes it on to a function of the file whose parameter does (two calls deep): the
callers of that function then give the values (:func:`callers`).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.callees import function_sites, module_sites
from gradtrace.lint.analysis.calls import ascii_code
from gradtrace.lint.analysis.cuts import INTEGER_METHODS
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.param_attrs import asks_no_grad, file_freezes
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_DEPTH = 8
MAX_HOPS = 2
# tensor methods whose result carries the receiver's graph (checked on torch 2.13)
KEEPS = frozenset({
    "cpu", "cuda", "to", "float", "double", "half", "view", "view_as", "reshape", "contiguous",
    "clone", "squeeze", "unsqueeze", "flatten", "permute", "transpose", "t", "expand",
    "expand_as", "repeat", "sum", "mean", "pow", "sqrt", "exp", "log", "abs", "mul", "add",
    "sub", "div", "matmul", "mm", "bmm", "softmax", "log_softmax", "sigmoid", "tanh", "relu",
    "norm", "clamp", "neg", "narrow", "select", "type_as", "cumsum", "prod",
})
KEEP_ATTRS = frozenset({"T", "mT", "H", "real", "imag"})
# torch.nn layers that hold weights (a module call of one makes a result that requires grad)
WEIGHTED = frozenset({"torch.nn." + n for n in (
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN", "LSTMCell",
    "GRUCell", "RNNCell", "MultiheadAttention", "Transformer", "TransformerEncoder",
    "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer", "PReLU",
    "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d")})
CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
GRAD_FACTORIES = frozenset({"torch." + f for f in (
    "tensor", "zeros", "ones", "randn", "rand", "empty", "full", "arange", "linspace", "eye",
    "zeros_like", "ones_like", "randn_like", "rand_like", "full_like", "as_tensor",
    "autograd.Variable")})


def requires_grad(ctx: Context, where: ast.AST, e: ast.AST, line: int) -> ast.AST | None:
    """The node a value's gradient comes from (a module call, a Parameter) when ``e``, read
    at ``line`` in the function (or module) ``where``, surely requires grad; else None
    (NOTE [values that require grad])."""
    if read_without_grad(ctx, e):
        return None
    src = _requires(ctx, where, e, line, 0)
    return None if src is None or file_freezes(ctx) else src


def read_without_grad(ctx: Context, e: ast.AST) -> bool:
    """``e`` is read only on the arm of a test saying the tensor it starts from does not
    require grad: the ``else`` of ``t.detach().numpy() if t.requires_grad else t.numpy()``
    (PyTorch's ONNX tutorial's ``to_numpy``), the body of ``if not t.requires_grad:``.

    # NOTE [test unspelt]
    Only a test reading the attribute ``requires_grad`` says so, and an attribute's name is
    code (NOTE [code text]): in a file whose code never spells ``requires_grad``, nothing is
    read on such an arm, known before the file's parent map is built (a walk of the whole
    tree; GT605 asked it in model files that never test the flag). In ASCII code only: a name
    may be spelt with other characters that Python reads as the same (NFKC)."""
    root = e
    while isinstance(root, (ast.Subscript, ast.Attribute, ast.Call)):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name) or not ctx.mentions("requires_grad") and ascii_code(ctx):
        return False  # no test can say so: the file's parents are not mapped (NOTE [test unspelt])
    parents = file_parents(ctx)
    child, up = e, parents.get(id(e))
    while up is not None and not isinstance(up, FUNCTION_TYPES + (ast.ClassDef,)):
        if isinstance(up, (ast.IfExp, ast.If)) and child is not up.test:
            says = _requires_test(up.test, root.id)
            in_body = child is up.body if isinstance(up, ast.IfExp) else child in up.body
            if says is not None and says != in_body:
                return True
        child, up = up, parents.get(id(up))
    return False


def _requires_test(test: ast.expr, name: str) -> bool | None:
    """True when ``test`` holds exactly when ``name`` requires grad (``name.requires_grad``),
    False when it holds exactly when it does not (``not name.requires_grad``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _requires_test(test.operand, name)
        return None if inner is None else not inner
    if isinstance(test, ast.Attribute) and test.attr == "requires_grad" \
            and isinstance(test.value, ast.Name) and test.value.id == name:
        return True
    return None


def _requires(ctx: Context, where: ast.AST, e: ast.AST, line: int,
              depth: int = 0) -> ast.AST | None:
    if depth > MAX_DEPTH:
        return None
    if isinstance(e, ast.Subscript):
        return _requires(ctx, where, e.value, line, depth + 1)
    if isinstance(e, ast.BinOp):
        return _requires(ctx, where, e.left, line, depth + 1) or _requires(
            ctx, where, e.right, line, depth + 1)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _requires(ctx, where, e.operand, line, depth + 1)
    if isinstance(e, ast.Name):
        return _name(ctx, where, e, line, depth)
    if isinstance(e, ast.Attribute):
        if e.attr in KEEP_ATTRS:
            return _requires(ctx, where, e.value, line, depth + 1)
        k = ctx.analysis.kind_in(e, where, line)
        if k is not None and k.what == PARAMETER and isinstance(k.node, ast.Call) \
                and not asks_no_grad(k.node):
            return e
        if e.attr == "weight" and k is None:  # `emb.weight` of `emb = nn.Embedding(...)`
            owner = ctx.analysis.kind_in(e.value, where, line)
            if owner is not None and owner.what == MODULE and owner.cls in WEIGHTED:
                return e
        return None
    if isinstance(e, ast.Call):
        return _call(ctx, where, e, line, depth)
    return None


def _name(ctx: Context, where: ast.AST, e: ast.Name, line: int, depth: int) -> ast.AST | None:
    scope = ctx.scope(where)
    b = scope.binding_before(e.id, line)
    if b is None:
        if where is ctx.tree or _is_param(where, e.id) or e.id in _lambda_params(ctx, where):
            return None  # a parameter (of a lambda in ``where`` too), not the global
        top = ctx.scope(ctx.tree).bindings.get(e.id, ())
        if len(top) != 1:
            return None  # a global bound once at the module level
        return _bound(ctx, ctx.tree, top[0], e.id, depth)
    return _bound(ctx, where, b, e.id, depth)


def _lambda_params(ctx: Context, fn: ast.AST) -> frozenset[str]:
    """The parameter names of the lambdas inside ``fn``."""
    return ctx.memo("lambda-params", fn, lambda: frozenset(
        x.arg for n in walk(fn) if isinstance(n, ast.Lambda)
        for x in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs)))


def _bound(ctx: Context, where: ast.AST, b: object, name: str, depth: int) -> ast.AST | None:
    stmt = b.stmt  # type: ignore[attr-defined]
    if b.no_grad or not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 \
            or not isinstance(stmt.targets[0], (ast.Name, ast.Tuple)):  # type: ignore[attr-defined]
        return None
    if ctx.scope(where).grad_off_at(stmt) is not None:
        return None
    if b.value is None:  # type: ignore[attr-defined]
        return _unpacked_output(ctx, where, stmt, name, depth)
    return _requires(ctx, where, b.value, b.line, depth + 1)  # type: ignore[attr-defined]


def _unpacked_output(ctx: Context, where: ast.AST, stmt: ast.Assign, name: str,
                     depth: int) -> ast.AST | None:
    """``z, mu, var = encoder(x)``: the element ``name`` takes of what a module class of the
    file returns, when every ``return`` of its ``forward`` is a tuple of that length whose
    element surely requires grad there (``a, b = X(), Y()`` is paired by the flow layer)."""
    t = stmt.targets[0]
    v = stmt.value
    if not isinstance(t, ast.Tuple) or not isinstance(v, ast.Call) \
            or any(isinstance(e, ast.Starred) for e in t.elts) \
            or not isinstance(v.func, (ast.Name, ast.Attribute)):
        return None
    idx = next((i for i, e in enumerate(t.elts) if isinstance(e, ast.Name) and e.id == name),
               None)
    k = ctx.analysis.kind_in(v.func, where, stmt.lineno)
    info = ctx.analysis.classes.get(k.cls or "") if k is not None and k.what == MODULE \
        else None
    fwd = info.methods.get("forward") if info is not None and info.is_module else None
    if idx is None or fwd is None:
        return None
    rets = [n for n in walk(fwd) if isinstance(n, ast.Return)]
    if not rets or any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                       and n is not fwd for n in walk(fwd)):
        return None  # a nested function's returns are not forward's
    found = None
    for r in rets:
        e = r.value
        if not isinstance(e, ast.Tuple) or len(e.elts) != len(t.elts) \
                or any(isinstance(x, ast.Starred) for x in e.elts):
            return None
        got = _requires(ctx, fwd, e.elts[idx], r.lineno, depth + 1)
        if got is None:
            return None
        found = found or got
    return found


def _call(ctx: Context, where: ast.AST, e: ast.Call, line: int, depth: int) -> ast.AST | None:
    f = e.func
    if ctx.scope(where).grad_off_at(e) is not None:
        return None
    if isinstance(f, ast.Attribute):
        if f.attr == "requires_grad_":  # `torch.randn(3).requires_grad_()`
            return e if not e.args or isinstance(e.args[0], ast.Constant) \
                and e.args[0].value is True else None
        if f.attr in KEEPS and not _torch_op(ctx, e):  # a method, not `F.relu(x)`
            got = _requires(ctx, where, f.value, line, depth + 1)
            if got is not None or f.attr not in ("add", "sub", "mul", "div", "matmul", "mm"):
                return got
            found = (_requires(ctx, where, a, line, depth + 1) for a in e.args)
            return next((g for g in found if g is not None), None)
    q = ctx.qualified_name(f) or ""
    if q == "torch.nn.Parameter":
        return e if not asks_no_grad(e) and not (
            len(e.args) > 1 and isinstance(e.args[1], ast.Constant) and not e.args[1].value) \
            else None
    if q in GRAD_FACTORIES:
        return e if any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                        and k.value.value is True for k in e.keywords) else None
    if _torch_op(ctx, e):
        if q.rpartition(".")[2] in INTEGER_METHODS:
            return None  # `torch.argmax(out, 1)`: integer or bool, never requires grad
        return next((g for a in e.args if not isinstance(a, ast.Starred)
                     and (g := _requires(ctx, where, a, line, depth + 1))), None)
    if isinstance(f, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind_in(f, where, line)
        if k is not None and k.what == MODULE and weighted(ctx, k.cls, k.node):
            return e
    return None


def weighted(ctx: Context, cls: str | None, node: ast.AST | None, depth: int = 0) -> bool:
    """Whether a module of class ``cls`` (built by ``node``) holds a trainable weight: a
    weighted ``torch.nn`` layer, a container built with one, a module class of the file that
    builds an ``nn.Parameter`` or one of those."""
    if cls is None or depth > 3:
        return False
    if cls in WEIGHTED:
        return True
    if cls in CONTAINERS:
        return isinstance(node, ast.Call) and any(
            isinstance(n, ast.Call) and _builds_weight(ctx, n, depth)
            for a in (*node.args, *(k.value for k in node.keywords)) for n in walk(a))
    info = ctx.analysis.classes.get(cls)
    if info is None or not info.is_module:
        return False
    return ctx.memo("weighted-class", info.node, lambda: any(
        isinstance(n, ast.Call) and _builds_weight(ctx, n, depth) for n in walk(info.node)))


def _builds_weight(ctx: Context, n: ast.Call, depth: int) -> bool:
    q = ctx.qualified_name(n.func) or ""
    if q == "torch.nn.Parameter":
        return not asks_no_grad(n)
    if q in WEIGHTED:
        return True
    if isinstance(n.func, ast.Name) and n.func.id in ctx.analysis.classes:
        return weighted(ctx, n.func.id, n, depth + 1)
    return q in CONTAINERS and weighted(ctx, q, n, depth + 1)


def _torch_op(ctx: Context, e: ast.Call) -> bool:
    """A ``torch.*`` function (not a class, not ``torch.nn.init``): its result carries the
    graph of its tensor arguments."""
    q = ctx.qualified_name(e.func) or ""
    return q.startswith("torch.") and q.rpartition(".")[2][:1].islower() \
        and not q.startswith("torch.nn.init")


def is_parameter(fn: ast.AST, name: str) -> bool:
    """``name`` is a positional or keyword parameter of the function ``fn``."""
    return _is_param(fn, name)


def _is_param(fn: ast.AST, name: str) -> bool:
    a = getattr(fn, "args", None)
    return a is not None and any(x.arg == name for x in (*a.posonlyargs, *a.args,
                                                         *a.kwonlyargs))


def passed_param(ctx: Context, where: ast.AST, e: ast.AST, line: int,
                 depth: int = 0) -> str | None:
    """The parameter of the function ``where`` that ``e`` (read at ``line``) is, through
    :data:`KEEPS`, subscripts, the first argument of a ``torch.*`` function
    (``F.interpolate(image, ...)``) and rebindings of it (``mat = mat.unsqueeze(0)``); None
    when it is anything else."""
    if depth > MAX_DEPTH or not isinstance(where, FUNCTION_TYPES) \
            or depth == 0 and read_without_grad(ctx, e):
        return None
    while True:
        if isinstance(e, ast.Subscript) or isinstance(e, ast.Attribute) and e.attr in KEEP_ATTRS:
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in KEEPS:
            e = e.func.value
        elif isinstance(e, ast.Call) and e.args and not isinstance(e.args[0], ast.Starred) \
                and _torch_op(ctx, e):  # `F.interpolate(image, size=...)`
            e = e.args[0]
        else:
            break
    if not isinstance(e, ast.Name):
        return None
    b = ctx.scope(where).binding_before(e.id, line)
    if b is None:
        return e.id if _is_param(where, e.id) else None
    if b.no_grad or not isinstance(b.stmt, ast.Assign) or b.value is None:
        return None
    return passed_param(ctx, where, b.value, b.line, depth + 1)


def callers(ctx: Context, fn: ast.AST, param: str
            ) -> Iterator[tuple[ast.Call, ast.AST, ast.expr]]:
    """(call, the function or module making it, the argument given for ``param``) for every
    call of ``fn`` in the file (nothing when ``fn`` is also used without a call we see)."""
    if not isinstance(fn, FUNCTION_TYPES):
        return
    for call, where in function_sites(ctx.analysis, fn) or ():
        if any(isinstance(a, ast.Starred) for a in call.args):
            continue
        if fn.name == "__call__" and not (isinstance(call.func, ast.Attribute)
                                          and call.func.attr == "__call__"):  # `norm(image)`
            a = fn.args
            names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
            v = dict(zip(names, call.args)).get(param)
        else:
            v = ctx.analysis.arguments(fn, call).get(param)
        if v is not None:
            yield call, where, v


def passed_requiring(ctx: Context, fn: ast.AST, param: str, hops: int = 0
                     ) -> tuple[ast.AST, list[ast.Call]] | None:
    """(where the gradient comes from, the calls on the way) when a call of ``fn`` the file
    makes with grad enabled passes, for ``param``, a value that surely requires grad (through
    the callers' own parameters, :data:`MAX_HOPS` calls up), from a function the file runs
    with grad enabled (:func:`runs_with_grad`)."""
    for call, w, arg in callers(ctx, fn, param):
        if ctx.scope(w).grad_off_at(call) is not None:
            continue
        src = requires_grad(ctx, w, arg, call.lineno)
        if src is not None:
            if runs_with_grad(ctx, w):
                return src, [call]
            continue
        p = passed_param(ctx, w, arg, call.lineno) if hops < MAX_HOPS else None
        got = passed_requiring(ctx, w, p, hops + 1) if p is not None else None
        if got is not None:
            return got[0], [*got[1], call]
    return None


def runs_with_grad(ctx: Context, fn: ast.AST, hops: int = 0) -> bool:
    """The module body, or a function every call of which in the file (one at least) is made
    with grad enabled, :data:`MAX_HOPS` calls up."""
    if fn is ctx.tree:
        return True
    if not isinstance(fn, FUNCTION_TYPES) or hops > MAX_HOPS:
        return False
    if hops == 0:
        return ctx.memo("runs-with-grad", fn, lambda: _runs_with_grad(ctx, fn))
    return _runs_with_grad(ctx, fn, hops)


def _runs_with_grad(ctx: Context, fn: ast.AST, hops: int = 0) -> bool:
    sites = function_sites(ctx.analysis, fn)  # type: ignore[arg-type]
    cls = ctx.analysis.class_of(fn)
    if not sites and cls is not None and cls.is_module and cls.methods.get("forward") is fn:
        sites = module_sites(ctx.analysis, cls.name)  # `net(x)` runs `Net.forward`
    return bool(sites) and all(
        w is not fn and ctx.scope(w).grad_off_at(c) is None and runs_with_grad(ctx, w, hops + 1)
        for c, w in sites)
