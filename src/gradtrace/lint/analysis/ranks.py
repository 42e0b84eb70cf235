"""How many values an expression holds: a 0-dim scalar, one value in a size-1 shape, or one
value per sample/element.

# NOTE [ranks]
``backward()`` without ``gradient`` needs a one-element output, and a ``gradient`` must have
the output's shape (torch 2.13: ``grad can be implicitly created only for scalar outputs``;
``Mismatch in shape: grad_output[0] has a shape of torch.Size([1]) and output[0] has a shape
of torch.Size([])``). :func:`rank` reads an expression into a :class:`Rank`:

- ``SCALAR`` (0-dim): a reduction without ``dim`` (``x.mean()``, ``torch.sum(x)``), a loss
  function or ``nn.*Loss`` criterion with its default reduction, a Python number, ``.item()``;
- ``ONE`` (one value in an explicit shape of known rank): ``torch.ones(1)``,
  ``torch.FloatTensor([1])``, ``x.view(1)``, ``scalar.unsqueeze(0)``;
- ``MANY`` (one value per sample or per element): a loss with ``reduction='none'``, the output
  of a layer (``nn.Linear``, a convolution, an ``nn.Sequential`` of them, a module class of the
  file whose every ``return`` is one), a softmax over a ``dim``, ``x[:, 0]`` of one, a reduction
  over ``dim`` >= 1 (or ``-k`` short of dim 0) of a value of 2 dims or more, ``x.unsqueeze(1)``,
  ``x.squeeze(i)`` of one, a linear layer (even with one output feature) on a batch of 2 dims
  or more: a linear layer keeps its input's dims;
- ``None``: unknown (an attribute, a ``squeeze()``...).

Through local names (also ``+=``, ``a, b = x, y``, a loop over a literal list), arithmetic
(scalar op scalar = scalar; anything op many = many), shape-keeping calls (``clamp``,
``gather``, ``.float()``), the returns of the file's functions and module classes (every return
must agree; an unpacked tuple's element), a dict they return (``out["loss"]``), list elements
(a literal, a comprehension, ``append``), and a function's parameters from the file's calls
(NOTE [parameter ranks]). ``Rank.origin`` is the ``return`` of a file function the
many-valued result came out of (the deepest one), for reporting.
A batch of one makes a ``MANY`` value one-element at run time: the fact is about the code's
intent (a per-sample loss), as GT510 reads ``reduction='none'``; but a batch of one made here
(``x.unsqueeze(0)``, ``torch.randn(1, 6)``: ``Rank.single``) is no batch: reducing its other
dims or a one-feature layer over it leaves one element, and is not read as many.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.callees import _binds as binds_of
from gradtrace.lint.analysis.callees import function_sites, module_sites
from gradtrace.lint.analysis.dims import int_value, keyword
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.rank_algebra import (  # noqa: F401 - re-exported for the rules
    ANY, CONVS, ELEMENTWISE, FACTORIES, FEATURES, KEEPS, LEGACY, LOSS_FUNCTIONS, MANY, ONE,
    REDUCTIONS, SAME_DIMS, SCALAR, SCALAR_RANK, SOFTMAX, TUPLED, Rank, agree, combine, derived,
    layer_on, layer_rank, literal, loss_rank, reduced, reduction_args, shape_args, sized,
    softmax_of, squeezed, unsqueezed,
)
from gradtrace.lint.analysis.module_results import SEQUENTIAL, forward_of, sequential_layers
from gradtrace.lint.analysis.reach import called_function, live_binding_before
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.facts import Analysis
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

MAX_DEPTH = 8


def rank(e: ast.AST, scope: Scope, ctx: Context, line: int | None = None,
         depth: int = 0) -> Rank | None:
    """What ``e`` holds when read at ``line`` in ``scope`` (NOTE [ranks]); None: unknown."""
    if depth > MAX_DEPTH:
        return None
    line = line if line is not None else getattr(e, "lineno", 0)
    try:
        return _rank(e, scope, ctx, line, depth + 1)
    except RecursionError:  # pragma: no cover - very deep expressions
        return None


def _rank(e: ast.AST, scope: Scope, ctx: Context, line: int, d: int) -> Rank | None:
    if isinstance(e, ast.Constant):
        return SCALAR_RANK if isinstance(e.value, (int, float)) and \
            not isinstance(e.value, bool) else None
    if isinstance(e, ast.Name):
        return _name(e.id, scope, ctx, line, d)
    if isinstance(e, ast.UnaryOp):
        return rank(e.operand, scope, ctx, line, d)
    if isinstance(e, ast.BinOp) and not isinstance(e.op, ast.MatMult):
        return combine(rank(e.left, scope, ctx, line, d), rank(e.right, scope, ctx, line, d))
    if isinstance(e, ast.Subscript):
        return _subscript(e, scope, ctx, line, d)
    if isinstance(e, ast.Attribute) and e.attr == "data":
        return rank(e.value, scope, ctx, line, d)
    if isinstance(e, ast.Call):
        return _call(e, scope, ctx, line, d)
    return None


def _name(name: str, scope: Scope, ctx: Context, line: int, d: int) -> Rank | None:
    if d > MAX_DEPTH:
        return None
    b = live_binding_before(scope, name, line)
    if b is None:
        return parameter_rank(scope.node, name, ctx) if not scope.bindings_before(
            name, line) else None
    memo: dict[tuple[int, str], Rank | None] = ctx.memo("ranks-bindings", scope.node, dict)
    key = (id(b.stmt), name)
    if key not in memo:  # once per binding, with the whole depth for its value: a chain of
        memo[key] = None  # names costs one reading of each (a loop's reads itself: unknown)
        memo[key] = _bound_value(name, b, scope, ctx)
    return memo[key]


def _bound_value(name: str, b: Binding, scope: Scope, ctx: Context) -> Rank | None:
    s = b.stmt
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
        return combine(_name(name, scope, ctx, b.line, 1), rank(s.value, scope, ctx, b.line))
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and b.value is not None:
        return rank(b.value, scope, ctx, b.line)  # `y = f(x)`, `a, b = f(x), g(x)`
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Call):
        i = _position(s.targets[0], name)  # `loss, acc = loss_fn(out, y)`
        fn = called_function(s.value, scope, b.line) if i is not None else None
        return _returned(fn, ctx, i) if fn is not None else None
    if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
        items = elements(s.iter, scope, ctx, b.line)  # `for x in [torch.randn(8, 32), ...]`
        if not items or any(_comprehension_reads(v, scope) for v in items):
            return None
        return agree([rank(v, scope, ctx, b.line) for v in items])
    return None


def _comprehension_reads(e: ast.AST, scope: Scope) -> bool:
    """``e`` is a comprehension's element reading the comprehension's own names (not the
    function's names of the same spelling)."""
    for n in walk(scope.node):
        if isinstance(n, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and n.elt is e:
            own = {t.id for g in n.generators for t in walk(g.target) if isinstance(t, ast.Name)}
            return any(isinstance(x, ast.Name) and x.id in own for x in walk(e))
    return False


# NOTE [parameter ranks]
# A parameter's rank is what every call of its function in the file passes for it, read at
# the call: the call sites of NOTE [parameter kinds] (none hidden: a function also used as a
# value, a method referenced as ``self.m``, has none), and for the ``forward`` of a module
# class of the file the calls of its instances (``net(x)``, ``self.loss_fn(a, b)``). A call
# that leaves the parameter to its default, a ``*args``/``**kw`` call, or sites that disagree
# leave it unknown; a recursive call passing it on is no caller. The rank keeps the caller's
# origin, marked ``passed``: a value the function makes from it and returns is its own
# (per-sample log-probabilities handed to a loss function that returns per-pair losses: the
# loss's ``return`` hands them out), while the parameter read as is keeps the caller's.
MAX_PARAM_SITES = 8


def parameter_rank(fn: ast.AST, name: str, ctx: Context) -> Rank | None:
    """The rank of parameter ``name`` of ``fn`` from the file's calls, once per function and
    parameter (NOTE [parameter ranks])."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or name in ("self", "cls"):
        return None
    a = fn.args
    if name not in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
        return None
    memo: dict[tuple[int, str], Rank | None] = ctx.memo("ranks-parameters", ctx.tree, dict)
    key = (id(fn), name)
    if key not in memo:
        memo[key] = None  # in progress: a call chain back into ``fn`` reads as unknown
        memo[key] = _parameter_rank(fn, name, ctx)
    return memo[key]


def _parameter_rank(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, ctx: Context
                    ) -> Rank | None:
    a = ctx.analysis
    cls = a.class_of(fn)
    through_instance = cls is not None and (fn.name == "forward" and cls.is_module
                                            or fn.name == "__call__")
    sites = module_sites(a, cls.name) if through_instance and cls.is_module \
        else function_sites(a, fn)
    if not sites or len(sites) > MAX_PARAM_SITES:
        return None
    got = []
    for call, where in sites:
        binds = _bound(a, fn, call, through_instance)
        v = binds.get(name) if binds is not None else None
        if v is None:
            return None
        if where is fn and isinstance(v, ast.Name) and v.id == name:
            continue  # `f(x, n - 1)` inside `f`: the parameter passed on
        got.append(rank(v, ctx.scope(where), ctx, call.lineno))
    r = agree(got)
    return replace(r, passed=True) if r is not None and r.origin is not None else r


def _bound(a: Analysis, fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
           through_instance: bool) -> dict[str, ast.expr] | None:
    """Parameter -> argument of ``call``; an instance's call (``net(x)``) binds the
    parameters after ``self``."""
    if not through_instance:
        return binds_of(a, fn, call)
    if any(isinstance(x, ast.Starred) for x in call.args) or \
            any(k.arg is None for k in call.keywords):
        return None
    names = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)][1:]
    return {**dict(zip(names, call.args)),
            **{k.arg: k.value for k in call.keywords if k.arg is not None}}


def _position(target: ast.AST, name: str) -> int | None:
    """Where ``name`` sits in an unpacking target ``a, b, c`` (no starred element)."""
    if not isinstance(target, (ast.Tuple, ast.List)) or any(
            isinstance(t, ast.Starred) for t in target.elts):
        return None
    got = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Name) and t.id == name]
    return got[0] if len(got) == 1 else None


def _subscript(e: ast.Subscript, scope: Scope, ctx: Context, line: int, d: int
               ) -> Rank | None:
    sl = e.slice
    if isinstance(sl, ast.Constant) and isinstance(sl.value, str):  # `out["loss"]`
        held = _dict_values(e.value, sl.value, scope, ctx, line, d)
        return agree([rank(v, sc, ctx, getattr(v, "lineno", 0), d) for v, sc in held])
    base = rank(e.value, scope, ctx, line, d)
    parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    if base is not None and base.what == MANY and any(isinstance(p, ast.Slice) for p in parts) \
            and not any(isinstance(p, ast.Constant) and p.value is Ellipsis for p in parts):
        return derived(base, MANY, 1, None)  # `x[:, 0]`: the sliced dims stay
    return None


def _dict_values(e: ast.AST, key: str, scope: Scope, ctx: Context, line: int, d: int
                 ) -> list[tuple[ast.AST, Scope]]:
    """What ``e[key]`` is, for ``e`` a dict literal, a name bound to one, or a call of a file
    function (module) whose every return is one."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is None or b.value is None or not isinstance(b.stmt, ast.Assign):
            return []
        return _dict_values(b.value, key, scope, ctx, b.line, d + 1)
    if isinstance(e, ast.Dict):
        vals = [v for k, v in zip(e.keys, e.values)
                if isinstance(k, ast.Constant) and k.value == key]
        return [(vals[-1], scope)] if vals else []
    if isinstance(e, ast.Call) and d < MAX_DEPTH:
        fn = called_function(e, scope, line)
        rets = _returns(fn)
        if not rets:
            return []
        fs = ctx.scope(fn)
        out = []
        for r in rets:
            got = _dict_values(r.value, key, fs, ctx, r.lineno, d + 1)  # type: ignore[arg-type]
            if not got:
                return []
            out += got
        return out
    return []


def _returns(fn: ast.AST | None) -> list[ast.Return]:
    if fn is None:
        return []
    rets = [n for n in scope_nodes(fn) if isinstance(n, ast.Return)]
    return [] if any(r.value is None for r in rets) else rets


def _returned(fn: ast.AST | None, ctx: Context, item: int | None = None) -> Rank | None:
    """What every ``return`` of a file function gives back (in its own scope); with ``item``,
    the ``item``-th element of the tuple each returns. Once per function and item: the
    function's own expressions get the whole depth (a chain of calls is bounded by the
    functions of the file, each in progress at most once)."""
    rets = _returns(fn)
    if not rets:
        return None
    memo: dict[tuple[int, int | None], Rank | None] = ctx.memo("ranks-returned", ctx.tree, dict)
    key = (id(fn), item)
    if key in memo:
        return memo[key]
    memo[key] = None  # in progress: a recursive function reads as unknown
    fs = ctx.scope(fn)
    got = []
    for r in rets:
        v = r.value
        if item is not None:
            v = v.elts[item] if isinstance(v, ast.Tuple) and len(v.elts) > item and not any(
                isinstance(x, ast.Starred) for x in v.elts) else None
        g = rank(v, fs, ctx, r.lineno) if v is not None else None
        if g is not None and g.what == MANY and (g.origin is None or g.passed):
            g = replace(g, origin=r, passed=False)  # made here from what came in
        got.append(g)
    memo[key] = out = agree(got)
    return out


def _call(e: ast.Call, scope: Scope, ctx: Context, line: int, d: int) -> Rank | None:
    f = e.func
    q = ctx.qualified_name(f) or ""
    short = q.rsplit(".", 1)[-1] if q else (f.attr if isinstance(f, ast.Attribute) else "")
    if q.startswith("torch.") and not q.startswith("torch.nn.modules"):
        return _torch_call(e, q, short, scope, ctx, line, d)
    root = dotted(f.value).split(".")[0] if isinstance(f, ast.Attribute) and dotted(
        f.value) else None
    if isinstance(f, ast.Attribute) and not (root and ctx.imports.is_imported(root)):
        got = _method(e, f.attr, scope, ctx, line, d)
        if got is not None:
            return got
    fn = called_function(e, scope, line)
    if fn is not None:
        return _returned(fn, ctx)
    k = ctx.analysis.kind(f, scope, line)
    if isinstance(f, ast.Name) and k is not None and k.what == MODULE:
        live = live_binding_before(scope, f.id, line)  # not one an `if` arm returned past
        if live is not None and live is not scope.binding_before(f.id, line):
            k = ctx.analysis.kind(live.value, scope, live.line) \
                if isinstance(live.value, ast.Call) else None
    if k is not None and k.what == MODULE and k.cls:
        return _module_call(k.cls, k.node, e, scope, ctx, line, d)
    return None


def _method(e: ast.Call, m: str, scope: Scope, ctx: Context, line: int, d: int
            ) -> Rank | None:
    recv = e.func.value  # type: ignore[attr-defined]
    if m == "item":
        return SCALAR_RANK
    if m in REDUCTIONS:
        dim = e.args[0] if e.args else keyword(e, "dim")
        if dim is None:
            return SCALAR_RANK if not e.keywords else None
        if m in TUPLED:
            return None
        return reduced(rank(recv, scope, ctx, line, d), dim, keyword(e, "keepdim"))
    if m in KEEPS:
        return rank(recv, scope, ctx, line, d)
    if m in SOFTMAX:
        return softmax_of(rank(recv, scope, ctx, line, d),
                          e.args[0] if e.args else keyword(e, "dim"))
    if m == "squeeze" and e.args:
        return squeezed(rank(recv, scope, ctx, line, d), int_value(e.args[0]))
    if m == "unsqueeze" and e.args:
        return unsqueezed(rank(recv, scope, ctx, line, d), int_value(e.args[0]))
    if m in ("view", "reshape"):
        sizes = shape_args(e)
        return sized(sizes, rank(recv, scope, ctx, line, d)) if sizes is not None else None
    if m == "permute":
        sizes = shape_args(e)
        base = rank(recv, scope, ctx, line, d)
        if sizes and base is not None and base.what == MANY:
            return derived(base, MANY, len(sizes), len(sizes))
        return Rank(ANY, len(sizes), len(sizes)) if sizes else None
    return None


def _torch_call(e: ast.Call, q: str, short: str, scope: Scope, ctx: Context, line: int,
                d: int) -> Rank | None:
    first = e.args[0] if e.args else None
    if short in LOSS_FUNCTIONS and q.startswith("torch.nn.functional."):
        return loss_rank(*reduction_args(e), short,
                         rank(first, scope, ctx, line, d) if first is not None else None)
    if short in REDUCTIONS and first is not None and q.count(".") == 1:
        dim = e.args[1] if len(e.args) > 1 else keyword(e, "dim")
        if dim is None:
            return SCALAR_RANK if not e.keywords else None
        if short in TUPLED:
            return None
        return reduced(rank(first, scope, ctx, line, d), dim, keyword(e, "keepdim"))
    if short in SOFTMAX and first is not None:
        return softmax_of(rank(first, scope, ctx, line, d),
                          e.args[1] if len(e.args) > 1 else keyword(e, "dim"))
    if short in KEEPS and first is not None:
        return rank(first, scope, ctx, line, d)
    if short in FACTORIES and q.count(".") == 1:
        sizes = shape_args(e) if short != "full" else (
            list(first.elts) if isinstance(first, (ast.Tuple, ast.List)) else None)
        return sized(sizes, None) if sizes is not None else None
    if short.endswith("_like") and short[:-5] in FACTORIES and first is not None:
        return rank(first, scope, ctx, line, d)
    if q in ("torch.tensor", *(f"torch.{n}" for n in LEGACY)) and first is not None:
        return literal(first, legacy=q != "torch.tensor")
    return None


def _module_call(cls: str, node: ast.AST | None, e: ast.Call, scope: Scope, ctx: Context,
                 line: int, d: int) -> Rank | None:
    short = cls.rsplit(".", 1)[-1]
    if cls.startswith("torch.nn.") and short.endswith("Loss") and isinstance(node, ast.Call):
        pred = rank(e.args[0], scope, ctx, line, d) if e.args else None
        return loss_rank(*reduction_args(node), short, pred)  # NOTE [legacy reduction]
    x = (lambda: rank(e.args[0], scope, ctx, line, d) if len(e.args) == 1 else None)
    if cls in SEQUENTIAL and isinstance(node, ast.Call):
        return _sequential(sequential_layers(node, ctx, None), ctx, x)
    if cls.startswith("torch.nn.") and (short in FEATURES or short in CONVS):
        got = layer_rank(short, node)
        return got if got is not None and got.what == MANY else layer_on(short, node, x())
    info = ctx.analysis.classes.get(cls)
    if info is not None and info.is_module:
        return _returned(forward_of(info), ctx)
    return None


def elements(e: ast.AST, scope: Scope, ctx: Context, line: int) -> list[ast.AST] | None:
    """The values a list holds, for ``e`` a list/tuple literal, a comprehension, or a name
    bound to one or to ``[]`` filled by ``append`` (read in ``scope``); None: unknown."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is None or b.value is None or not isinstance(b.stmt, ast.Assign):
            return None
        v = b.value
        if isinstance(v, ast.List) and not v.elts:
            out: list[ast.AST] = []
            for n in walk(scope.node):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == "append" and dotted(n.func.value) == e.id \
                        and len(n.args) == 1 and b.line < n.lineno < line:
                    out.append(n.args[0])
            return out or None
        return elements(v, scope, ctx, b.line) if isinstance(
            v, (ast.Name, ast.List, ast.Tuple, ast.ListComp)) else None
    if isinstance(e, (ast.List, ast.Tuple)):
        return list(e.elts) if e.elts and not any(
            isinstance(x, ast.Starred) for x in e.elts) else None
    if isinstance(e, ast.ListComp):
        return [e.elt]
    return None


def _sequential(layers: list[ast.AST], ctx: Context, x: Callable[[], Rank | None]
                ) -> Rank | None:
    """An ``nn.Sequential`` of torch layers: what its linear and elementwise layers make of
    the input (``x``, read on demand), in turn; else its last layer's output (past
    elementwise ones)."""
    shorts = []
    for layer in layers:
        lq = ctx.qualified_name(getattr(layer, "func", layer)) or ""
        shorts.append(lq.rsplit(".", 1)[-1] if lq.startswith("torch.nn.") else None)
    last = next(((s, layer) for s, layer in zip(reversed(shorts), reversed(layers))
                 if s is None or s not in ELEMENTWISE), None)
    if last is None or last[0] is None:
        return None
    out = layer_rank(last[0], last[1])
    r = x() if all(s in ELEMENTWISE or s in SAME_DIMS for s in shorts) else None
    for s, layer in zip(shorts, layers):
        if r is not None and s not in ELEMENTWISE:
            r = layer_on(s, layer, r)  # type: ignore[arg-type]
    return r if r is not None else out
