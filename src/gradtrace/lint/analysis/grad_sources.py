"""Where the tensors of one expression come from: under grad-off, from a live model, or data.

The GT2xx rules ask one question about a loss: *can any gradient reach a trainable parameter
through it?* :func:`trace` answers it by following names backwards through their bindings in
one function (see :class:`gradtrace.lint.flow.Scope`) and classifying every source:

* ``dead``: produced under ``no_grad`` / ``inference_mode`` / ``set_grad_enabled(False)``
  (locally or in a helper of the same file whose result is made under grad-off);
* ``live``: a module/model call, a parameter, or anything that may carry a ``grad_fn``;
* ``unknown``: a function argument, an attribute, an unresolved call;
* ``data``: a loop target over a loader, a constant, a new tensor from a factory.

A call of a helper of the file is followed by the subclass in :mod:`.helper_sources`; whether
the helper's result is made under grad-off is :func:`.grad_off_returns.returns_off`.

# NOTE [prediction position]
For a loss call (``F.cross_entropy(pred, target)``, ``criterion(pred, target)``), only the
first argument is the prediction. A non-prediction argument that is unknown is data (targets);
a live one means a stop-gradient by design (``mse(teacher_out, student_out)``): not a bug.
An unknown that is the result of calling an object this function cannot type
(``q_network = QNetwork(envs).to(device)``, ``net = build(cfg)``; ``old_q = q_network(obs)``)
may be a model's output: DQN's ``mse_loss(td_target, old_q)`` puts the prediction second, so
such an argument keeps the loss unknown (``Deps.called``).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import (
    MOVES, NO_HISTORY_METHODS, RG_METHODS, SAVES_INPUT_FUNCS, VIEW_OR_SAME, is_loss_callee)
from gradtrace.lint.analysis.bound_calls import called_object
from gradtrace.lint.analysis.model_calls import runs_model
from gradtrace.lint.analysis.module_receivers import handled_as_module
from gradtrace.lint.analysis.reach import (
    decorated_off, off_mode, reaching, value_of)
from gradtrace.lint.analysis.kinds import LOADER
from gradtrace.lint.analysis.loop_targets import iterated_call
from gradtrace.lint.analysis.vocabulary import DATA_ITER_RE, INFERENCE_NAME_RE
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.flow import GRAPH, MODULE, NEW_TENSOR_FUNCS, PARAMETER, PARAMS, Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes
from gradtrace.lint.analysis.flag_between import flag_set_between
from gradtrace.lint.analysis.foreign_weightless import foreign_weightless_value
from gradtrace.lint.analysis.weightless_classes import weightless_class, weightless_file_class

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

LIVE_MULT = (ast.Mult, ast.MatMult, ast.Div)
COMPUTED = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript)


@dataclass(frozen=True)
class Dead:
    """A value made under grad-off: the statement (or helper call) and the disabling node."""

    expr: ast.AST          # the bound value, or the helper call
    off: ast.AST           # the with / decorator that disabled grad
    mode: str              # "off" | "inference"
    helper: ast.AST | None = None  # the helper def when the cut is in another function


@dataclass
class Deps:
    """Sources of an expression (see module docstring)."""

    dead: list[Dead] = field(default_factory=list)
    live: bool = False
    unknown: bool = False
    explicit_grad: bool = False   # requires_grad_()/requires_grad=True somewhere on the path
    consumers: list[tuple[ast.AST, Dead]] = field(default_factory=list)  # live op saving a dead
    called: bool = False  # unknown because an untyped object was called: maybe a model run

    def merge(self, other: Deps, target: bool = False) -> None:
        self.dead.extend(other.dead)
        self.live |= other.live
        self.explicit_grad |= other.explicit_grad
        self.consumers.extend(other.consumers)
        self.called |= other.called
        if not target or other.called:  # NOTE [prediction position]
            self.unknown |= other.unknown


def is_inference_function(fn: ast.AST, ctx: Context) -> bool:
    """Named like inference (predict/evaluate/...) or decorated to disable grad."""
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    if INFERENCE_NAME_RE.search(fn.name):
        return True
    return decorated_off(fn, ctx)


# NOTE [binding met twice]
# A binding met again on one walk (the cycle guard) gives its sources again, without the ops
# recorded the first time: ``loss = loss + kd`` with ``kd`` from the ``preds`` that ``loss``
# already followed is live.
@dataclass
class _Query:
    """The state of one walk: the bindings already followed (a cycle guard, see
    NOTE [binding met twice]) and, for a caller that only wants sources that are *all* dead,
    whether a live one was met
    (then every later part answers live at once: ``loss`` rebound in loop after loop)."""

    stop_on_live: bool = False
    seen: dict[tuple[str, int], Deps | None] = field(default_factory=dict)  # None: in progress
    live: bool = False


class Tracer:
    """Classifies the sources of expressions inside one function scope.

    One per function (:func:`local_sources`; following the file's helpers:
    :func:`.helper_sources.grad_sources`), cached on the context and shared by the GT2 rules:
    it holds the function's facts (its arguments, the bindings that may reach a use) and the
    answers given so far; each query walks with its own :class:`_Query`, so an answer never
    depends on what was asked before."""

    def __init__(self, ctx: Context, scope: Scope) -> None:
        self.ctx = ctx
        self.scope = scope
        self._q = _Query()
        self._answers: dict[tuple[int, int], Deps] = {}
        self._env: dict[str, Deps] = {}  # comprehension variables in scope
        a = scope.node.args if isinstance(scope.node, FUNCTION_TYPES) else None
        self.params: set[str] = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg,
                                                 a.kwarg) if x is not None} if a else set()

    # -- entry -------------------------------------------------------------------------------
    def sources(self, e: ast.AST, line: int, stop_on_live: bool = False) -> Deps:
        """Sources of ``e`` evaluated at ``line`` (1-based), read-only for the caller.
        ``stop_on_live``: only whether they are all dead matters (a live answer may be partial).
        Answered once per expression and line: a partial live answer is not kept, any other
        answer is the whole one."""
        key = (id(e), line)
        hit = self._answers.get(key)
        if hit is not None:
            return hit
        outer, self._q = self._q, _Query(stop_on_live)
        try:
            d = self.trace(e, line)
        finally:
            self._q = outer
        if not (stop_on_live and d.live):
            self._answers[key] = d
        return d

    def trace(self, e: ast.AST, line: int, depth: int = 0) -> Deps:
        if self._q.live:
            return Deps(live=True)
        d = self._trace(e, line, depth)
        if d.live and self._q.stop_on_live:
            self._q.live = True
        return d

    def _trace(self, e: ast.AST, line: int, depth: int) -> Deps:
        d = Deps()
        if depth > 25:
            d.unknown = True
            return d
        s = self.scope.statement_of(e)
        off = self.scope.grad_off_at(s) if s is not None else None
        if off is not None and isinstance(e, COMPUTED) and not _is_factory(self.ctx, e):
            mode = off_mode(off, self.ctx)
            d.dead.append(Dead(e, off, mode))
            return d
        method = getattr(self, "_t_" + type(e).__name__, None)
        if method is None:
            for child in child_nodes(e):
                if isinstance(child, ast.expr):
                    d.merge(self.trace(child, line, depth + 1))
            return d
        return method(e, line, depth)

    # -- names -------------------------------------------------------------------------------
    def _t_Constant(self, e: ast.Constant, line: int, depth: int) -> Deps:
        return Deps()

    def _t_Name(self, e: ast.AST, line: int, depth: int) -> Deps:
        if self._q.live:
            return Deps(live=True)
        d = Deps()
        name = dotted(e)
        if name is None:
            d.unknown = True
            return d
        if name in self._env:
            d.merge(self._env[name])
            return d
        bs = reaching(self.scope, name, line, self.scope.statement_of(e))
        if not bs:
            if isinstance(e, ast.Attribute):
                if e.attr == "data":
                    return d  # detached: GT1xx's business
                if name.startswith("self.") or isinstance(e.value, ast.Attribute):
                    d.live = True  # self.weight, self.scale: may be a parameter
                    return d
                return self.trace(e.value, line, depth + 1)  # outputs.loss: from outputs
            d.unknown = True
            return d
        for b in bs:  # if/else, a loop: each binding that may reach the use
            if flag_set_between(self.scope, name, b.line, line):
                d.explicit_grad = True  # `z = src.clone(); z.requires_grad = True`: a new leaf
                continue
            d.merge(self._binding(e, name, b, depth))
            if self._q.live:
                return d
        return d

    def _binding(self, e: ast.AST, name: str, b: Binding, depth: int) -> Deps:
        key = (name, b.line)
        if key in self._q.seen:  # NOTE [binding met twice]: its sources again, not its ops
            done = self._q.seen[key]
            return Deps(list(done.dead), done.live, done.unknown, done.explicit_grad, [],
                        done.called) if done is not None else Deps()
        self._q.seen[key] = None
        d = self._q.seen[key] = self._bound(e, name, b, depth)
        return d

    def _bound(self, e: ast.AST, name: str, b: Binding, depth: int) -> Deps:
        d = Deps()
        if b.kind in (PARAMETER, PARAMS):
            d.live = True
            return d
        stmt = b.stmt
        if isinstance(stmt, (ast.For, ast.AsyncFor)):  # a batch from a loader: data, or
            it = iterated_call(self.ctx, self.scope, stmt)  # NOTE [elements of a model's output]
            return self.trace(it, stmt.lineno, depth + 1) if it is not None else d
        value = value_of(b)  # tuple unpacking: the whole right-hand side
        if value is None:
            d.unknown = True
            return d
        if isinstance(stmt, ast.AugAssign) and self.scope.binding_before(name, b.line):
            d.merge(self._t_Name(e, b.line, depth + 1))
        d.merge(self.trace(value, b.line, depth + 1))
        if isinstance(value, (ast.List, ast.Dict, ast.Set)) or isinstance(value, ast.Call) \
                and isinstance(value.func, ast.Name) and value.func.id in ("list", "dict", "set"):
            for mc in self.scope.method_calls:  # what `outs.append(model(x))` puts in
                if mc.receiver == name and mc.method in FILLERS:
                    d.merge(self._args(mc.call, mc.stmt.lineno, depth + 1))
        return d

    _t_Attribute = _t_Name

    # -- calls -------------------------------------------------------------------------------
    def _t_Call(self, e: ast.Call, line: int, depth: int) -> Deps:
        ctx = self.ctx
        d = Deps()
        func = e.func
        qual = ctx.qualified_name(func) or ""
        kws = {k.arg: k.value for k in e.keywords}
        rg = kws.get("requires_grad")
        if isinstance(rg, ast.Constant) and rg.value is True or qual == "torch.nn.Parameter":
            d.explicit_grad = True
            return d
        if qual in NEW_TENSOR_FUNCS:
            return d
        if isinstance(func, ast.Attribute):
            if func.attr in NO_HISTORY_METHODS:
                return d
            if func.attr in RG_METHODS:
                d.explicit_grad = True
                return d
        if qual in ("next", "iter") and len(e.args) == 1:  # an element, read as a `for` reads
            k = ctx.analysis.kind(e.args[0], self.scope, line)  # one: a loader's is data
            if k is not None and k.what == LOADER or DATA_ITER_RE.search(ctx.code_of(e.args[0])):
                return d
            return self.trace(e.args[0], line, depth + 1)
        if is_loss_callee(ctx, func):
            return self._loss_call(e, line, depth)
        through = self._through_helper(e, line, depth)
        if through is not None:
            return through
        if qual.startswith("torch.") and not qual.startswith("torch.nn.") \
                or qual.startswith("torch.nn.functional."):
            return self._args(e, line, depth, saves=qual.rpartition(".")[2] in SAVES_INPUT_FUNCS)
        if isinstance(func, ast.Attribute):
            recv_kind = self.scope.kind(func.value)
            callee = dotted(func)
            if recv_kind == MODULE or callee is not None and (
                    callee.startswith("self.") and callee.count(".") == 1
                    or runs_model(ctx, self.scope, callee, line)):
                return self._module_call(e, line, depth)
            # a tensor method: receiver + args (a move's are a device, dtype or shape)
            d.merge(self.trace(func.value, line, depth + 1))
            if func.attr not in MOVES:
                d.merge(self._args(e, line, depth, saves=func.attr in SAVES_INPUT_FUNCS))
            return d
        if isinstance(func, ast.Name):
            obj = called_object(self.scope, e, line)  # `f = model.__call__; f(x)`: model(x)
            if obj is not None:
                return self._t_Call(obj, line, depth + 1)
            if self._weightless(func, line):  # NOTE [weightless module of the project]
                return self._args(e, line, depth, saves=True)
            kind = self.scope.kind(func)
            if kind == MODULE or func.id in self.params or self._bound_module(func.id, line) \
                    or runs_model(ctx, self.scope, func.id, line):
                return self._module_call(e, line, depth)
            args = self._args(e, line, depth)
            if any(self.scope.kind(a) == MODULE for a in e.args):
                args.live = True
            if not e.args and not e.keywords:
                args.unknown = True
            elif self._local_object(func.id, line):
                args.unknown = args.called = True  # NOTE [prediction position]
            return args
        d.unknown = True
        return d

    def _through_helper(self, e: ast.Call, line: int, depth: int) -> Deps | None:
        """What a call of one of the file's functions gives, when the subclass follows them
        (:class:`.helper_sources.HelperSources`); None: not followed."""
        return None

    def _helper_inference(self, call: ast.Call, line: int) -> Dead | None:
        """The inference tensor a followed helper's call returns (see :meth:`_through_helper`)."""
        return None

    def _local_object(self, name: str, line: int) -> bool:
        """``name`` holds an object this function got from a call it cannot type
        (``train_model, opt = accelerator.prepare(model, opt)``): calling it may run a model."""
        b = self.scope.binding_before(name, line)
        if b is None and self.scope.node is not self.ctx.tree and name not in self.params:
            # a global of the script
            b = self.ctx.scope(self.ctx.tree).binding_before(name, 10**9)
        if b is None or b.kind is not None or isinstance(b.stmt, (ast.For, ast.AsyncFor)):
            return False
        value = value_of(b)
        return isinstance(value, ast.Call)

    def _bound_module(self, name: str, line: int) -> bool:
        b = self.scope.binding_before(name, line)
        return b is not None and b.kind in (MODULE, GRAPH)

    def _args(self, e: ast.Call, line: int, depth: int, saves: bool = False) -> Deps:
        d = Deps()
        parts = [self.trace(a, line, depth + 1) for a in (*e.args, *(k.value for k in e.keywords))]
        for p in parts:
            d.merge(p)
        if saves and any(p.live for p in parts):
            self._consume(e, [*e.args, *(k.value for k in e.keywords)], line, d)
        return d

    def _consume(self, op: ast.AST, args: list[ast.expr], line: int, d: Deps) -> None:
        """Record ``op`` as saving each argument that *is* an inference tensor (a name bound
        under ``inference_mode``, or a view of one). A result computed outside
        ``inference_mode`` from an inference tensor is a normal tensor (checked on 2.13)."""
        for a in args:
            dead = self._direct_inference(a, line, 0)
            if dead is not None:
                d.consumers.append((op, dead))

    def _direct_inference(self, a: ast.AST, line: int, depth: int) -> Dead | None:
        while depth < 8:
            if isinstance(a, ast.Subscript):
                a = a.value
            elif isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
                    and a.func.attr in VIEW_OR_SAME:
                a = a.func.value
            else:
                break
            depth += 1
        if isinstance(a, ast.Call):
            return self._helper_inference(a, line)
        name = dotted(a) if isinstance(a, (ast.Name, ast.Attribute)) else None
        b = self.scope.binding_before(name, line) if name else None
        if b is None or depth >= 8:
            return None
        off = self.scope.grad_off_at(b.stmt)
        value = value_of(b)
        if off is not None and off_mode(off, self.ctx) == "inference" \
                and isinstance(value, COMPUTED) and not _is_factory(self.ctx, value):
            return Dead(value, off, "inference")
        if off is None and isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            return self._direct_inference(value, b.line, depth + 1)
        return None

    def _module_call(self, e: ast.Call, line: int, depth: int) -> Deps:
        if self._weightless(e.func, line):  # NOTE [weightless module of the project]
            return self._args(e, line, depth, saves=True)
        d = Deps(live=True)
        args = [*e.args, *(k.value for k in e.keywords)]
        for a in args:
            d.merge(self.trace(a, line, depth + 1))
        self._consume(e, args, line, d)
        return d

    def _weightless(self, func: ast.expr, line: int) -> bool:
        """# NOTE [weightless module of the project]
        ``mse = nn.MSELoss()`` (a torch module without weights), or
        ``seg = DiceLoss(ignore=True)`` with ``DiceLoss`` an ``nn.Module`` of this file or of
        another file of the project that holds no weights
        (NOTE [weightless class of the file], NOTE [weightless class of another file]):
        ``seg(pred, y)`` is as live as its arguments, not a model run. A mean-teacher step
        whose student forward went under ``no_grad`` sums an MSE and such a Dice loss: the
        loss is dead. A name bound once to the constructor (here or in ``__init__`` as
        ``self.<x>``); anything else: a model."""
        value: ast.expr | None = func
        if isinstance(func, ast.Name):
            bs = self.scope.bindings.get(func.id, ())
            b = self.scope.binding_before(func.id, line)
            value = b.value if b is not None and len(bs) == 1 else None
        if not isinstance(value, (ast.Call, ast.Attribute)):
            return False
        if isinstance(value, ast.Call) and (weightless_class(
                self.ctx.qualified_name(value.func)) or weightless_file_class(
                dotted(value.func), self.ctx)):
            return True
        return foreign_weightless_value(value, self.scope, self.ctx)

    def _loss_call(self, e: ast.Call, line: int, depth: int) -> Deps:
        """See NOTE [prediction position]; a loss method of an object the function handles
        as a module runs its layers (NOTE [module receivers])."""
        if isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) \
                and handled_as_module(self.scope, e.func.value.id):
            return self._module_call(e, line, depth)
        args = list(e.args) + [k.value for k in e.keywords if k.arg in ("input", "pred")]
        rest = [k.value for k in e.keywords if k.arg not in ("input", "pred")]
        d = Deps()
        if not args:
            d.unknown = True
            return d
        d.merge(self.trace(args[0], line, depth + 1))
        others = [self.trace(a, line, depth + 1) for a in args[1:] + rest]
        for o in others:
            d.merge(o, target=True)
        if d.live or any(o.live for o in others):
            self._consume(e, args + rest, line, d)
        return d

    # -- operators ---------------------------------------------------------------------------
    def _t_BinOp(self, e: ast.BinOp, line: int, depth: int) -> Deps:
        left = self.trace(e.left, line, depth + 1)
        right = self.trace(e.right, line, depth + 1)
        d = Deps()
        d.merge(left)
        d.merge(right)
        if isinstance(e.op, LIVE_MULT):
            for a, b in ((e.left, right), (e.right, left)):
                if b.live:
                    self._consume(e, [a], line, d)
        return d

    def _t_IfExp(self, e: ast.IfExp, line: int, depth: int) -> Deps:
        d = Deps()  # the test picks an arm: none of its tensors flows into the value
        d.merge(self.trace(e.body, line, depth + 1))
        d.merge(self.trace(e.orelse, line, depth + 1))
        return d

    def _t_Lambda(self, e: ast.AST, line: int, depth: int) -> Deps:
        return Deps(unknown=True)

    def _t_ListComp(self, e: ast.ListComp, line: int, depth: int) -> Deps:
        """``[b.to(device) for b in batch]``: the element, each loop variable standing for
        what its iterable holds."""
        saved, d = dict(self._env), Deps()
        try:
            for g in e.generators:
                it = self.trace(g.iter, line, depth + 1)
                d.merge(it)
                for n in ast.walk(g.target):
                    if isinstance(n, ast.Name):
                        self._env[n.id] = it
            for x in ([e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]):
                d.merge(self.trace(x, line, depth + 1))
        finally:
            self._env = saved
        return d

    _t_GeneratorExp = _t_SetComp = _t_DictComp = _t_ListComp


FILLERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


def _is_factory(ctx: Context, e: ast.AST) -> bool:
    return isinstance(e, ast.Call) and (ctx.qualified_name(e.func) or "") in NEW_TENSOR_FUNCS


def local_sources(ctx: Context, node: ast.AST) -> Tracer:
    """The :class:`Tracer` of the function or module ``node`` alone (calls of the file's
    helpers unknown), built once per file: :func:`.grad_off_returns.returns_off` reads it."""
    return ctx.memo("gt2-sources-local", node, lambda: Tracer(ctx, ctx.scope(node)))
