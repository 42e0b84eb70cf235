"""What autograd saves: which ops save their output, which statements write in place.

Shared by GT602/GT603 (:mod:`.saved_output`, through :class:`._base.InplaceRule`); see the
package docstring for the op table.
"""
from __future__ import annotations

import ast
import re
import weakref
from dataclasses import dataclass
from typing import Any, Iterator

from gradtrace.lint.analysis.eval_backprop import eval_backward
from gradtrace.lint.analysis.namespaces import graphless_with_options
from gradtrace.lint.analysis.module_results import SEQUENTIAL, built, sequential_layers
from gradtrace.lint.analysis.steps import backward_of, step_calls
from gradtrace.lint.analysis.trained_helpers import backward_after_call, backward_after_method
from gradtrace.lint.analysis.trained_methods import runs_with_graph
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import DETACHED, LEAF, NUMBER, NUMPY
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE
from gradtrace.lint.analysis.grad_sources import is_inference_function
from gradtrace.lint.analysis.inference_arms import inference_arm
from gradtrace.lint.analysis.inference_runs import run_for_inference
from gradtrace.lint.analysis.last_pass import after_loop_of, skipped_on_last_pass
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.inplace._ops import (  # noqa: F401 - _base reads them from here
    SAVED_OUT, VIEW_METHODS, _has_module_word, _first_layer, _LazyModules, _op_of_call,
    _statements, _writes_input, built_op, inplace_local,
)

NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream"})
ARITH_WRITES = frozenset({"add_", "sub_", "mul_", "div_"})
MULTI_SAVED = frozenset({"eigh"})  # ops whose every output is saved for backward
OP_WORDS = re.compile(r"sigmoid|softmax|tanh|\bexp(m1)?\b|relu|\belu|sqrt|reciprocal|expit")
TRAINING_FUNCS = frozenset({"forward"})


@dataclass(frozen=True)
class Producer:
    """The op whose saved output a name holds: its call and a display name."""

    call: ast.AST
    op: str
    family: str


def _producer(call: ast.Call, ctx: Context, modules: _LazyModules) -> Producer | None:
    """The saved-output op ``call`` applies (None when grad is off there)."""
    op = _op_of_call(call, ctx, modules, ctx.scope())
    if op is None or ctx.grad_disabled is not None:
        return None
    return Producer(call, op.rstrip("_"), SAVED_OUT.get(op, "relu"))


def _input_has_no_grad(prod: Producer, ctx: Context) -> bool:
    """Whether the op's input is a new, detached or Python value (nothing was recorded)."""
    inner = _innermost_call(prod.call)
    args = getattr(inner, "args", [])
    if not args and isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
        args = [inner.func.value]  # `a.sigmoid()`: the receiver is the input
    if not args:
        return False
    kind = ctx.scope().kind(args[0])
    if kind is None and ctx.statement is not None and isinstance(args[0], ast.BinOp):
        return graphless_with_options(ctx, ctx.scope(), args[0], ctx.statement.lineno)
    return kind in (NUMBER, NUMPY, DETACHED) or kind == LEAF and not _made_grad_leaf(
        args[0], ctx)


def _made_grad_leaf(e: ast.AST, ctx: Context) -> bool:
    """``a`` bound to ``torch.tensor(..., requires_grad=True)`` / ``....requires_grad_()``."""
    name = dotted(e)
    stmt = ctx.statement
    b = ctx.scope().binding_before(name, stmt.lineno) if name and stmt else None
    if b is None or not isinstance(b.value, ast.Call):
        return False
    v = b.value
    if isinstance(v.func, ast.Attribute) and v.func.attr == "requires_grad_":
        return not v.args or not (isinstance(v.args[0], ast.Constant) and not v.args[0].value)
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in v.keywords)


def _innermost_call(e: ast.AST) -> ast.AST:
    while isinstance(e, ast.Subscript) or (isinstance(e, ast.Call) and isinstance(
            e.func, ast.Attribute) and e.func.attr in VIEW_METHODS):
        e = e.value if isinstance(e, ast.Subscript) else e.func.value  # type: ignore[attr-defined]
    return e


def _write_target(stmt: ast.stmt, ctx: Context, modules: _LazyModules,
                  scope: Any = None) -> tuple[str, str, ast.AST] | None:
    """(name, kind of write, node) for an in-place write statement: ``p[m] = v`` ("index"),
    ``p += v`` ("aug"), ``p.mul_(v)`` ("arith"/"method"), ``F.relu(p, inplace=True)``,
    ``torch.relu_(p)``, ``self.relu(p)`` with an in-place ReLU, and with the function's
    ``scope``, ``relu2(p)`` with a local ``relu2 = nn.ReLU(inplace=True)`` ("method")."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Subscript):
        name = dotted(stmt.targets[0].value)
        return (name, "index", stmt.targets[0]) if name else None
    if isinstance(stmt, ast.AugAssign):
        t = stmt.target
        if isinstance(t, ast.Subscript):
            name = dotted(t.value)
            return (name, "index", t) if name else None
        name = dotted(t)
        return (name, "aug", t) if name else None
    call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr.endswith("_") and (
            isinstance(stmt, (ast.Expr, ast.Return))  # `return out.add_(x)` writes too
            or _rebound_to_itself(stmt, dotted(stmt.targets[0]))) \
            and not f.attr.startswith("_") and f.attr not in NOT_WRITES:
        name = dotted(f.value)
        return (name, "arith" if f.attr in ARITH_WRITES else "method", call) if name else None
    if call.args and (_inplace_call(call, ctx, modules) or scope is not None and isinstance(
            f, ast.Name) and inplace_local(f, call.lineno, ctx, scope) is not None):
        name = dotted(call.args[0])
        return (name, "method", call) if name else None
    return None


def _written_name(stmt: ast.stmt, local: bool = False) -> str | None:
    """The name a statement may write in place, from its shape alone (cheap pre-check);
    ``local``: also ``y = f(x)`` with ``f`` a plain name (a local module)."""
    if isinstance(stmt, ast.AugAssign):
        t = stmt.target
        return dotted(t.value if isinstance(t, ast.Subscript) else t)
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
            return dotted(stmt.targets[0].value)
        call = stmt.value
    elif isinstance(stmt, (ast.Expr, ast.Return)):
        call = stmt.value
    else:
        return None
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr.endswith("_") and (
            isinstance(stmt, (ast.Expr, ast.Return)) or local and _rebound_to_itself(
                stmt, dotted(stmt.targets[0]))):
        return dotted(f.value)
    if call.args and (call.keywords or local and isinstance(f, ast.Name) or isinstance(
            f, ast.Attribute) and (f.attr.endswith("_") or isinstance(f.value, ast.Name)
                                   and f.value.id == "self")):
        return dotted(call.args[0])
    return None


def _inplace_call(call: ast.Call, ctx: Context, modules: _LazyModules) -> bool:
    if any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
           for k in call.keywords):
        return True
    q = ctx.qualified_name(call.func) or ""
    if q.startswith("torch.") and q.endswith("_") and not q.endswith("__"):
        return True
    return modules.inplace(dotted(call.func))


def _in_training(ctx: Context, fn: ast.AST, stmt: ast.stmt,
                 prod: Producer | None = None) -> ast.Call | bool:
    """A backward call after ``stmt`` in ``fn``, or True for a module's forward. A backward
    that follows decides whatever the function is called (``score_and_fit``: the name is the
    last resort, only for a function running none). An op applied to a layer's result
    (``g = torch.sigmoid(self.score(x))``) counts in any method that runs with the graph, as
    a write into the layer's result does (NOTE [trained methods])."""
    for sink in step_calls(ctx, fn).losses():
        if sink.call.lineno > stmt.end_lineno:  # type: ignore[operator]
            return sink.call
    if is_inference_function(fn, ctx):
        return False
    cls = ctx.class_def
    name = getattr(fn, "name", "")
    if cls is None and LOSS_NAME_RE.search(name):
        return not _eval_branch(_path_to(fn.body, stmt))  # a loss function: always trained
    after = backward_after_call(ctx, fn) if cls is None else backward_after_method(ctx, fn)
    if after is not None:  # a helper called before a backward (NOTE [trained helpers])
        return after
    if cls is not None and _runs_as_forward(cls, name, ctx, prod is not None and _fed_by_layer(
            prod, cls, ctx)) and not run_for_inference(ctx, cls) \
            and not _is_autograd_function(cls, fn, ctx):  # type: ignore[attr-defined]
        path = _path_to(fn.body, stmt)
        if inference_arm(ctx, fn, path):  # NOTE [arm run only for inference]
            return False
        return not _eval_branch(path) \
            or eval_backward(ctx, cls.name) or False  # NOTE [eval instance backpropagated]
    return False


def _fed_by_layer(prod: Producer, cls: ast.ClassDef, ctx: Context) -> bool:
    """Whether the op's input calls a module attribute of ``cls`` (``self.score(x)``)."""
    inner = _innermost_call(prod.call)
    args = list(getattr(inner, "args", [])[:1])
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
        args.append(inner.func.value)  # `self.score(x).sigmoid()`
    info = ctx.analysis.classes.get(cls.name)
    if info is None:
        return False
    for a in args:
        for c in walk(a):
            f = getattr(c, "func", None) if isinstance(c, ast.Call) else None
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id == "self":
                k = info.attr_kind(f.attr)
                if k is not None and k.is_module:
                    return True
    return False


def _runs_as_forward(cls: ast.ClassDef, name: str, ctx: Context,
                     widened: bool = False) -> bool:
    """``forward``, or ``__call__`` of a module class (RK-Net's ``USAM``: a module call runs
    it instead of ``forward``); with ``widened``, any method of a module class that runs with
    its graph (NOTE [trained methods]: ``forward_single`` called per level, a method
    ``forward`` calls through ``self``). Widened only for a write into a layer's result (the
    layer's parameters make its graph): an op on a tensor made in the method (``torch.eye``,
    ``torch.arange``) records nothing."""
    if name in TRAINING_FUNCS:
        return True
    info = ctx.analysis.classes.get(cls.name)
    if info is None or not info.is_module:
        return False
    return name == "__call__" or widened and runs_with_graph(ctx, cls.name, name)


def _path_to(body: list[ast.stmt], target: ast.stmt) -> list[ast.stmt]:
    """The statements enclosing ``target`` inside ``body``, outermost first, then ``target``."""
    for s in body:
        if s is target:
            return [s]
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        if s.lineno <= target.lineno <= (s.end_lineno or 0):
            for f in ("body", "orelse", "finalbody"):
                sub = getattr(s, f, None)
                if sub:
                    path = _path_to(sub, target)
                    if path:
                        return [s, *path]
            for h in getattr(s, "handlers", ()):
                path = _path_to(h.body, target)
                if path:
                    return [s, *path]
    return []


def _is_autograd_function(cls: ast.ClassDef, fn: ast.AST | None, ctx: Context,
                          bases: bool = True) -> bool:
    """``forward`` of a ``torch.autograd.Function``: it runs with grad disabled (a static
    method, or a method of a class whose base is a ``Function``; ``bases=False``: the
    caller has read the bases)."""
    if any(dotted(d) == "staticmethod" for d in getattr(fn, "decorator_list", ())):
        return True
    return bases and any((ctx.qualified_name(b) or "").endswith("Function") for b in cls.bases)


def _eval_branch(path: list[ast.stmt]) -> bool:
    """Inside ``if not self.training:`` / the ``else`` of ``if self.training:``."""
    for s, inner in zip(path, path[1:]):
        if isinstance(s, ast.If) and "training" in ast.dump(s.test):
            negated = isinstance(s.test, ast.UnaryOp) and isinstance(s.test.op, ast.Not)
            if negated == (inner in s.body):
                return True
    return False


_SHARED: weakref.WeakKeyDictionary[Context, dict[int, Any]] = weakref.WeakKeyDictionary()


def _shared(ctx: Context) -> dict[int, Any]:
    """Per-file memo shared by GT602 and GT603 (both need the same scan)."""
    d = _SHARED.get(ctx)
    if d is None:
        d = _SHARED[ctx] = {}
    return d


# a view of the op's output bound to the name (`z = relu(h).reshape(b, -1, d)`) shares its
# version counter: a write into it is a write into the saved output (`reshape`, like
# `flatten`, of an op's fresh contiguous result is a view)
BOUND_VIEWS = VIEW_METHODS | {"reshape", "reshape_as"}


def _candidate_writes(node: ast.Call, ctx: Context, modules_of: Any) -> list[tuple]:
    """(producer, write stmt, kind, target, fn) for each in-place write into the name that the
    saved-output call ``node`` is assigned to, until that name is rebound."""
    stmt = ctx.statement
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return []
    top = stmt.value
    while isinstance(top, ast.Subscript) or isinstance(top, ast.Call) and isinstance(
            top.func, ast.Attribute) and top.func.attr in BOUND_VIEWS:
        top = top.value if isinstance(top, ast.Subscript) else top.func.value
    if node is not top:
        return []
    memo = _shared(ctx)
    key = id(node)
    if key in memo:
        return memo[key]  # type: ignore[no-any-return]
    out: list[tuple] = []
    memo[key] = out
    t = stmt.targets[0]
    names = [dotted(t)] if not isinstance(t, ast.Tuple) else [  # `evals, evecs = eigh(a)`
        e.id for e in t.elts if isinstance(e, ast.Name)] if top is stmt.value else []
    fn = (ctx.function or ctx.tree) if all(names) else None  # a script's body counts too
    if fn is None:
        return out
    later = _after(fn, stmt, memo)
    aliases = {a for s in later if (a := _alias_of(s, names))}
    if not any(_written_name(s, True) in names or aliases and _written_name(s, True) in aliases
               for s in later):
        return out  # nothing after it may write the names: its op need not be known
    modules = modules_of(ctx)
    prod = _producer(node, ctx, modules)
    if prod is None or len(names) > 1 and prod.op not in MULTI_SAVED:
        return out
    scope = ctx.scope(fn)
    for name in names:
        for s in later:
            if _written_name(s, True) == name and not _other_arm(scope, stmt, s, name) and not (
                    skipped_on_last_pass(fn, stmt, name) and after_loop_of(fn, stmt, s)):
                w = _write_target(s, ctx, modules, scope)
                if w is not None and w[0] == name:
                    out.append((prod, s, w[1], w[2], fn))
            alias = _alias_of(s, [name]) if aliases else None
            if alias is not None:  # NOTE [accumulator alias]
                for t in _after(fn, s, memo):
                    if _written_name(t, True) == alias and not _other_arm(scope, s, t, alias) \
                            and not (skipped_on_last_pass(fn, s, alias)
                                     and after_loop_of(fn, s, t)):
                        w = _write_target(t, ctx, modules, scope)
                        if w is not None and w[0] == alias:
                            out.append((prod, t, w[1], w[2], fn))
                    if _rebinds(t, alias) and not _rebound_to_itself(t, alias) and t is not s:
                        break
            if _rebinds(s, name) and not _rebound_to_itself(s, name):
                break
    return out


def _alias_of(s: ast.stmt, names: list[str]) -> str | None:
    """# NOTE [accumulator alias]
    ``acc = h`` (a plain name bound to one of ``names``): ``acc`` holds the very tensor, so a
    later in-place write into ``acc`` writes the op's saved output. The running sum that starts
    as the first block's output (``if i == 0: acc = h`` / ``else: acc += h``; DGL's ARMA
    stacks, MMOCR's FPEM_FFM) writes the first pass's ReLU output on the second pass: the
    write counts unless it is on the other arm of the alias's ``if`` with no loop around both
    (:func:`_other_arm`), and until ``acc`` is bound anew."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
            and isinstance(s.value, ast.Name) and s.value.id in names \
            and s.targets[0].id not in names:
        return s.targets[0].id
    return None


def _rebound_to_itself(s: ast.stmt, name: str) -> bool:
    """``x = x.clamp_min_(0)``: the name keeps the tensor it held, written in place."""
    v = getattr(s, "value", None)
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
        and v.func.attr.endswith("_") and dotted(v.func.value) == name


def _other_arm(scope: Any, made: ast.stmt, write: ast.stmt, name: str) -> bool:
    """``if squash: y = sigmoid(y)`` / ``else: y += 0.5``: the write never runs on the
    output (other arm of one ``if``). With a loop around both, one pass may make the output and
    the next write it, unless every path of the loop's body to the write binds ``name`` anew
    first (``x = a + b`` / ``if leaky: x = leaky_relu(x, inplace=True)`` / ``elif relu:
    F.relu(x, inplace=True)``): then the write sees only that binding."""
    if not scope.exclusive(made, write):
        return False
    loops = {id(x) for x in scope.loops_of(made)}
    common = [x for x in scope.loops_of(write) if id(x) in loops]
    if not common:
        return True
    path = set(scope.branches.get(id(write), ()))
    return any(b.line < write.lineno and set(scope.branches.get(id(b.stmt), ())) <= path
               and any(x is common[-1] for x in scope.loops_of(b.stmt))
               and _rebinds(b.stmt, name) for b in scope.bindings.get(name, ()))


def _after(fn: ast.AST, stmt: ast.stmt, memo: dict[int, Any]) -> list[ast.stmt]:
    """Statements of ``fn`` after ``stmt`` in source order (nested blocks included)."""
    key = -id(fn)
    found = memo.get(key)
    if found is None:
        stmts = list(_statements(fn.body))  # type: ignore[attr-defined]
        found = memo[key] = (stmts, {id(x): i for i, x in enumerate(stmts)})
    stmts, index = found
    i = index.get(id(stmt))
    return [] if i is None else stmts[i + 1:]


def _rebinds(s: ast.stmt, name: str) -> bool:
    targets: list[ast.expr] = []
    if isinstance(s, ast.Assign):
        if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            return s.targets[0].id == name
        targets = s.targets
    elif isinstance(s, (ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [s.target]
    elif isinstance(s, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in s.items if i.optional_vars is not None]
    for t in targets:
        for n in walk(t):
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store) \
                    and dotted(n) == name:
                return True
    return False


def sequential_writes(call: ast.Call, ctx: Context) -> Iterator[tuple[Producer, ast.AST]]:
    """(producer, in-place layer) for ``call`` = ``nn.Sequential(..., a, b, ...)`` where ``a``'s
    result is the output of an op that saves it (NOTE [module results]: an activation, a
    Sequential or a block of the file ending in one) and ``b`` (or the first layer of a
    Sequential ``b``) writes its input in place: the Sequential hands ``a``'s output to ``b``,
    which overwrites what backward needs (the VQA classifier's ``nn.ReLU(), nn.Dropout(p,
    inplace=True)``). Only in a file that runs a backward: a model file that others train, or
    a Sequential only run forward, is left alone."""
    if not call.args or not ctx.mentions("inplace") \
            or (ctx.qualified_name(call.func) or "") not in SEQUENTIAL:
        return
    fn = ctx.function
    layers = sequential_layers(call, ctx, fn)
    for prev, nxt in zip(layers, layers[1:]):
        first = _first_layer(nxt, ctx) if isinstance(nxt, ast.Call) else None
        if first is None or not _writes_input(first, ctx):
            continue
        got = built(prev, ctx, fn)
        op = built_op(got, ctx) if got is not None and not got.container else None
        if op is not None and op in SAVED_OUT and _file_backwards(ctx):
            yield Producer(prev, op, SAVED_OUT[op]), first


def _file_backwards(ctx: Context) -> bool:
    """The file calls ``backward()`` / ``torch.autograd.grad`` somewhere."""
    return ctx.mentions("backward", "grad") and ctx.memo(
        "gt6-file-backwards", ctx.tree, lambda: any(
            isinstance(n, ast.Call) and backward_of(n, ctx) is not None for n in walk(ctx.tree)))
