"""Where a value comes from and where it leaves the graph: the one tracer under GT1xx.

:class:`Tracer` answers, for one expression of one function, whether some path reaches a value
that may carry a graph without being cut (``live``) and where live values were cut on the way
(:class:`~.cuts.Cut`; what cuts is the one table in :mod:`.cuts`). Unknown values (calls of
modules or user functions, arguments, ``self.x``) count as live; data (loader batches,
target-like arguments, constants, hyper-parameters, tokenizer and config objects) as dead.
:func:`origins` gives the tracer of a function, built once per file and shared.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterable

from gradtrace.lint.analysis.cuts import (
    CUT_FUNCS, DATA, DEAD, FRESH_ATTRS, LIVE, NON_TENSOR_KWARGS, NONDIFF, NUMPY,
    PAIR_METHODS, REBUILD_FUNCS, Cut, Trace, asks_grad, fresh_call, graphless_no_grad,
    is_functional_loss, is_torch_loss, map_cut_kind, objects_of, pair_source, peel, pure_loss,
    top_defs, unpacks_indices, packed_values)
from gradtrace.lint.analysis.filled_grads import filled_without_graph
from gradtrace.lint.analysis.arg_roles import loss_inputs, model_fed
from gradtrace.lint.analysis.attr_origins import constructor_input, cut_attribute, setting_attr
from gradtrace.lint.analysis.batches import batch_objects, batch_unpackings, field
from gradtrace.lint.analysis.call_traces import CallTraces
from gradtrace.lint.analysis.name_traces import NameTraces
from gradtrace.lint.analysis.hook_stores import run_between
from gradtrace.lint.analysis.loss_evidence import passed_graph
from gradtrace.lint.analysis.numpy_reads import read_by_numpy
from gradtrace.lint.analysis.data_sites import closure_owner, grad_off_call, nested_sites
from gradtrace.lint.analysis.objects import is_record_class
from gradtrace.lint.analysis.paths import statement_paths
from gradtrace.lint.analysis.reach import reaching
from gradtrace.lint.analysis.shadowed import shadows_import
from gradtrace.lint.analysis.toplevel import module_level_functions, module_value, nonlocal_numbers
from gradtrace.lint.analysis.vocabulary import DATA_ITER_RE, INPUT_RE, OBJECT_RE, TARGET_RE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.statement_shapes import comprehension_counter, drawn_from
from gradtrace.lint.analysis.yielded import generator_call

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope


MAX_DEPTH = 120  # nested trace calls; each is a few Python frames


class Tracer(CallTraces, NameTraces):
    """Trace queries over one function scope; memoised, read-only for callers."""

    def __init__(self, scope: Scope, ctx: Context) -> None:
        self.scope = scope
        self.ctx = ctx
        node = scope.node
        self.params: set[str] = set()     # arguments that may carry a graph
        self.settings: set[str] = set()   # arguments with a constant default: hyper-parameters
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = [*a.posonlyargs, *a.args]
            defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
            pairs = [*zip(pos, defaults), *zip(a.kwonlyargs, a.kw_defaults),
                     (a.vararg, None), (a.kwarg, None)]
            for arg, default in pairs:
                if arg is None or arg.arg in ("self", "cls"):
                    continue
                if isinstance(default, ast.Constant) and default.value is not None:
                    self.settings.add(arg.arg)
                else:
                    self.params.add(arg.arg)
        self._memo: dict[tuple[int, int], Trace] = {}
        self._busy: set[tuple[str, int]] = set()
        self._pure: dict[str, bool] = {}  # answers of pure_loss, setting_attr
        self._env: dict[str, Trace] = {}  # comprehension variables in scope
        self._nonlocals: frozenset[str] | None = None  # see toplevel.nonlocal_numbers
        self._inputs: frozenset[str] | None = None  # see _model_inputs
        self._depth = 0

    def bindings_at(self, name: str, use: ast.stmt | None, line: int) -> list[Binding]:
        """Bindings of ``name`` that may reach ``use``: the last dominating one and later ones."""
        return reaching(self.scope, name, line, use)

    # -- tracing -----------------------------------------------------------------------------
    def trace(self, e: ast.expr, use: ast.stmt | None, line: int) -> Trace:
        """What ``e`` (read at ``line``, in statement ``use``) is built from."""
        key = (id(e), line)
        hit = self._memo.get(key)
        if hit is None:
            if self._depth > MAX_DEPTH:
                return LIVE  # too deep to follow: unknown, so never a finding
            self._depth += 1
            try:
                hit = self._memo[key] = self._trace(e, use, line)
            finally:
                self._depth -= 1
        return hit

    def _all(self, es: Iterable[ast.AST | None], use: ast.stmt | None, line: int) -> Trace:
        """The union of the traces; stops at the first live one (its cuts are never reported)."""
        out = DEAD
        for x in es:
            if isinstance(x, ast.expr):
                t = self.trace(x, use, line)
                if t.live:
                    return LIVE
                out = out | t
        return out

    def _trace(self, e: ast.expr, use: ast.stmt | None, line: int) -> Trace:
        if isinstance(e, ast.Constant):
            return DEAD
        if isinstance(e, ast.Name):
            return self._name(e.id, use, line)
        if isinstance(e, ast.Attribute):
            return self._attribute(e, use, line)
        if isinstance(e, ast.Call):
            return self._call(e, use, line)
        if isinstance(e, ast.BinOp):
            return self._all((e.left, e.right), use, line)
        if isinstance(e, ast.UnaryOp):
            return DEAD if isinstance(e.op, ast.Not) else self.trace(e.operand, use, line)
        if isinstance(e, ast.Compare):
            return self._cut(NONDIFF, e, [e.left, *e.comparators], use, line)
        if isinstance(e, ast.Subscript):
            return self._subscript(e, use, line)
        if isinstance(e, ast.IfExp):
            return self._all((e.body, e.orelse), use, line)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            return self._all(e.elts, use, line)
        if isinstance(e, ast.Dict):
            return self._all(e.values, use, line)
        if isinstance(e, (ast.Starred, ast.Await, ast.NamedExpr)):
            return self.trace(e.value, use, line)
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return self._comprehension(e, use, line)
        if isinstance(e, (ast.JoinedStr, ast.Lambda, ast.BoolOp)):
            return DEAD
        return LIVE

    def _comprehension(self, e: ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp,
                       use: ast.stmt | None, line: int) -> Trace:
        """The element, with each loop variable standing for what it iterates over."""
        saved = dict(self._env)
        try:
            for g in e.generators:  # `for i, s in enumerate(scores)`: `s` from `scores`,
                for n in walk(g.target):  # `i` a count
                    if isinstance(n, ast.Name):
                        self._env[n.id] = DEAD if comprehension_counter(g, n.id) else \
                            self.trace(drawn_from(g, n.id), use, line)  # type: ignore[arg-type]
            elts = [e.value] if isinstance(e, ast.DictComp) else [e.elt]  # as a Dict: values
            return self._all(elts, use, line)
        finally:
            self._env = saved

    def _name(self, name: str, use: ast.stmt | None, line: int) -> Trace:
        env = self._env.get(name)
        if env is not None:
            return env
        bs = self.bindings_at(name, use, line)
        if bs and name in self.params and use is not None and not any(
                statement_paths(self.ctx, self.scope.node).dominates(b.stmt, use) for b in bs):
            # NOTE [parameter rebound on one path]
            # `if weights is None: weights = torch.ones(n)`: the bindings of a parameter that
            # all sit in blocks not enclosing the use (one `if` arm) leave the argument's own
            # value reaching it on the other path; both are traced (a GT102 alarm otherwise
            # blamed the cut of another branch for a loss built from the argument)
            return self._param(name) | self._bound(name, bs, line)
        if not bs:
            if name in self.ctx.imports.aliases:
                return DEAD  # an imported constant or module
            if name in self.settings or name in nonlocal_numbers(self):
                return DEAD
            if name in self.params:
                return self._param(name)
            if id(self.scope.node) not in module_level_functions(self.ctx):
                return self._closure(name)  # NOTE [calls handing data]
            # a global: NOTE [module constants]
            return module_value(origins(self.ctx, self.ctx.tree), name)
        if read_by_numpy(self.ctx, self.scope, name):
            return DEAD  # NOTE [read raw by NumPy]
        return self._detached_after(name, bs, use, line, self._bound(name, bs, line))

    def _closure(self, name: str) -> Trace:
        outer = closure_owner(self.ctx, self.scope.node, name)
        if outer is None:
            return LIVE  # unknown
        t = origins(self.ctx, outer)
        bs = list(t.scope.bindings.get(name, ()))
        return t._name(name, None, 0) if not bs else t._bound(name, bs, 1 << 30) | (
            t._param(name) if name in t.params else DEAD)

    def _param(self, name: str) -> Trace:
        """Live unless data (NOTE [parameters given data]); NOTE [parameter rebound on one path]."""
        dead = TARGET_RE.match(name) and name not in loss_inputs(self.scope, self.ctx) \
            and not passed_graph(self.ctx, self.scope.node, name) or \
            OBJECT_RE.match(name) or name in self._model_inputs() or \
            self._given_no_graph(name) or given_data(self.ctx, self.scope.node, name)
        return DEAD if dead else LIVE

    def _bound(self, name: str, bs: list[Binding], line: int) -> Trace:
        """The trace of ``name`` through its bindings ``bs`` reaching ``line``."""
        out = DEAD
        for b in bs:
            if (name, b.line) in self._busy:
                continue
            self._busy.add((name, b.line))
            try:
                t = self.binding_trace(b)
            finally:
                self._busy.discard((name, b.line))
            out = out | Trace(t.live, tuple(Cut(c.kind, c.node, c.operand,
                                                ((name, b.line),) + c.via) for c in t.cuts))
            if not t.live and not t.cuts and self.made_trainable(name):
                out = LIVE
            if isinstance(b.value, (ast.List, ast.Dict, ast.Set)) or (
                    isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Name)
                    and b.value.func.id in ("list", "dict", "set")):
                out = out | self._filled(name, line)
        if not out.live and self._slice_fed(name, line):
            return LIVE
        return out

    def _model_inputs(self) -> frozenset[str]:
        """Arguments named like input data (``x``, ``inputs``, ``obs``) that the function feeds
        to a callee named like a model (``self.model(x)``, ``net(inputs)``) and never makes
        trainable: the model's input, upstream of its parameters, so not a path from the
        model to the loss (``criterion(recon.detach(), x)`` keeps no path from the model)."""
        if self._inputs is None:
            self._inputs = frozenset(n for n in model_fed(self.scope) if n in self.params
                                     and INPUT_RE.match(n) and not self.made_trainable(n))
        return self._inputs

    def binding_trace(self, b: Binding) -> Trace:
        """What the value bound by ``b`` carries (graph, cuts), read at its own line."""
        s = b.stmt
        if isinstance(s, ast.AugAssign):
            return self._name(b.name, s, b.line) | self.trace(s.value, s, b.line)
        made = s.value if b.value is None and isinstance(s, ast.Assign) else b.value
        if b.no_grad and graphless_no_grad(made):  # made with grad off (a name, or a tuple
            return Trace(False, self.trace(made, s, b.line).cuts)  # unpacked): cuts kept (GT107)
        if b.value is not None:
            return self.trace(b.value, s, b.line)
        if id(s) in batch_unpackings(self.scope, self.ctx):
            return DEAD  # unpacked next to the model's input (NOTE [batch siblings])
        if isinstance(s, ast.Assign):  # tuple unpacking: the whole right-hand side
            if unpacks_indices(s, b.name, self.ctx):
                return self._cut(NONDIFF, s.value, [pair_source(s.value)], s, b.line)
            return self.trace(s.value, s, b.line)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            it = drawn_from(s, b.name)  # `zip(range(n), rets)`: the range is not `rets`
            if DATA_ITER_RE.search(self.ctx.code_of(it)) and not generator_call(it, self.scope):
                return DEAD
            return self.trace(it, s, b.line)
        return LIVE

    def _attribute(self, e: ast.Attribute, use: ast.stmt | None, line: int) -> Trace:
        if e.attr == "data":
            packed = packed_values(e.value, self.ctx)  # `pack_padded_sequence(x, n).data`
            if packed is not None or dotted(e.value) in objects_of(self.scope):
                return self.trace(packed or e.value, use, line)  # a field of a batch object
            return self._cut(DATA, e, [peel(e.value)], use, line)
        if e.attr in FRESH_ATTRS or e.attr == "grad" and filled_without_graph(self.ctx):
            return DEAD  # NOTE [gradient without a graph]
        name = dotted(e)
        if name is not None and self.scope.bindings.get(name):
            bs = self.bindings_at(name, use, line)
            if bs and not run_between(self.ctx, self.scope.node, name,
                                      max(b.line for b in bs), line):  # NOTE [hook stores]
                return self._name(name, use, line)
        if isinstance(e.value, ast.Name) and e.value.id in ("self", "cls"):
            if name is not None and (setting_attr(self, name)
                                     or constructor_input(self, e.attr, line)):
                return DEAD
            cls = self.ctx.analysis.class_of(self.scope.node)  # NOTE [attribute origins]
            cut = cut_attribute(self.ctx, cls.node, e.attr, origins) if cls else None
            return LIVE if cut is None else cut
        if name is not None and name.partition(".")[0] in self.ctx.imports.aliases:
            return DEAD  # ``math.pi``, ``torch.float32``, ``cfg.LAMBDA`` of an imported module
        if self._batch_field(e):
            return DEAD
        return self.trace(e.value, use, line)

    def _batch_field(self, e: ast.Attribute | ast.Subscript) -> bool:
        """``replay_data.rewards``, ``batch["y"]``: a field of a batch whose other field is
        the model's input (NOTE [batch siblings])."""
        return isinstance(e.value, ast.Name) and field(e) and \
            e.value.id in batch_objects(self.scope, self.ctx)

    def _subscript(self, e: ast.Subscript, use: ast.stmt | None, line: int) -> Trace:
        v = e.value
        if isinstance(e.slice, ast.Constant) and e.slice.value == 1 and isinstance(v, ast.Call) \
                and isinstance(v.func, ast.Attribute) and v.func.attr in PAIR_METHODS and len(
                    v.args) + len(v.keywords) > (dotted(v.func.value) == "torch"):  # indices
            return self._cut(NONDIFF, e, [pair_source(v)], use, line)
        if self._batch_field(e):
            return DEAD
        return self.trace(v, use, line)

    def _call(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace:
        qual = "" if shadows_import(self, e.func) else self.ctx.qualified_name(e.func) or ""
        if qual in CUT_FUNCS and e.args:
            return self._cut(CUT_FUNCS[qual], e, [peel(e.args[0])], use, line)
        if qual == "map" and len(e.args) == 2 and map_cut_kind(e.args[0], self.ctx) is not None:
            # `map(torch.detach, (q, k, v))`: each element cut (compressive-transformer)
            return self._cut(map_cut_kind(e.args[0], self.ctx), e, [e.args[1]], use, line)  # type: ignore[arg-type]
        if qual == "torch.from_numpy" and e.args:
            # its argument is a NumPy array (torch raises TypeError for anything else): no
            # history to lose here; a cut, if any, is where the array was made (`.numpy()`)
            return Trace(False, self.trace(e.args[0], use, line).cuts)
        if qual in REBUILD_FUNCS or qual == "torch.as_tensor" and e.args \
                and self._sequence(e.args[0], use, line):
            return self._rebuild(e, use, line)
        if fresh_call(qual):
            return LIVE if asks_grad(e) else DEAD  # `torch.zeros(3, requires_grad=True)`
        if qual == "torch.where" and len(e.args) == 3:
            values = self._all(e.args[1:], use, line)
            if values.live:
                return values
            return self._cut(NONDIFF, e, [e.args[0]], use, line) | Trace(False, values.cuts)
        if is_functional_loss(qual) and len(e.args) == 2 and all(
                k.arg in NON_TENSOR_KWARGS for k in e.keywords):
            pred = self.trace(e.args[0], use, line)  # (input, target)
            if pred.live or self.trace(e.args[1], use, line).live:
                return LIVE
            return pred  # a target's own cuts (a mask of labels) are not the loss's cut
        if qual in ("torch.as_tensor", "sum", "max", "min", "abs") or (
                qual.startswith("torch.") and qual.rpartition(".")[2][:1].islower()):
            return self.args_trace(e, use, line)
        if qual.startswith("numpy.") and qual.count(".") == 1:
            # `np.sum([l1, l2])`, `np.exp(t)`: NumPy reads each tensor through `.numpy()`
            return self._cut(NUMPY, e, [peel(a) for a in e.args], use, line)
        if qual.startswith(("numpy.", "math.")):
            return self.args_trace(e, use, line)
        if qual in ("next", "iter") and len(e.args) == 1:
            return self._element(e.args[0], use, line)
        through = self._through_helper(e, use, line)
        if through is not None:
            return through
        if isinstance(e.func, ast.Name) and is_record_class(self.ctx, e.func.id):
            return self.args_trace(e, use, line)  # `TLE(bstar=x.item())`: holds its arguments
        if pure_loss(self, e.func) or (isinstance(e.func, ast.Call) and is_torch_loss(
                self.ctx.qualified_name(e.func.func))) or (
                isinstance(f := self._unaliased(e.func), ast.Name)
                and helper_is_pure(self.ctx, f.id)):
            return self.args_trace(e, use, line)
        if isinstance(e.func, ast.Attribute) and not qual.startswith("torch."):
            return self._method(e, e.func, use, line)
        bound = self._partial_values(e)
        if bound is not None:
            return self._all(bound, use, line)
        return LIVE  # a module, a user function, a method of self: may carry a graph

    def _partial_values(self, e: ast.Call) -> list[ast.expr] | None:
        """``attn_fn(q, k, v)`` with ``attn_fn = partial(full_attn, dropout_fn=...)`` bound
        once and ``full_attn`` a pure function of the file (:func:`helper_is_pure`): the values
        its result comes from, the call's and the partial's arguments that the function reads
        (an unused bound keyword, a setting, is not one); None otherwise."""
        if not isinstance(e.func, ast.Name):
            return None
        bs = self.scope.bindings.get(e.func.id, ())
        v = bs[0].value if len(bs) == 1 else None
        if not (isinstance(v, ast.Call) and (self.ctx.qualified_name(v.func) or "")
                == "functools.partial" and v.args and isinstance(v.args[0], ast.Name)
                and helper_is_pure(self.ctx, v.args[0].id)):
            return None
        fn = top_defs(self.ctx)[v.args[0].id]
        read = {n.id for n in walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        kws = [k.value for k in (*v.keywords, *e.keywords) if k.arg is None or k.arg in read]
        return [*v.args[1:], *e.args, *kws]

    def _through_helper(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace | None:
        """What a call of one of the file's functions is, when the subclass follows them
        (the GT1 loss paths: NOTE [helper cuts]); None: not followed."""
        return None


def origins(ctx: Context, node: ast.AST, arguments_live: bool = True) -> Tracer:
    """The :class:`Tracer` of the function or module ``node``, built once per file.

    ``arguments_live=False``: the function's arguments count as dead (is anything else live?).
    """
    def make() -> Tracer:
        t = Tracer(ctx.scope(node), ctx)
        if not arguments_live:
            t.settings |= t.params
            t.params = set()
        return t
    return ctx.memo("origins" if arguments_live else "origins-args-dead", node, make)


def given_data(ctx: Context, fn: ast.AST, name: str) -> bool:
    """# NOTE [parameters given data]
    Every call of ``fn`` in the project (one at least; none in other files: the reverse
    index) passes for ``name`` a value its caller's tracer finds not live: data (PointDSC's
    keypoints, NOTE [batch siblings]) or a cut (``f(h.detach().numpy())``: the caller's cut;
    the helper's NumPy cuts nothing). Two callers up; a caller asked again: live."""
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.callers import foreign_sites
    from gradtrace.lint.analysis.grad_values import callers
    memo: dict[tuple[int, str], bool] = ctx.memo("origins-given-data", ctx.tree, dict)
    key, hops = (id(fn), name), ctx.memo("origins-given-data-hops", ctx.tree, lambda: [0])
    if key in memo or hops[0] >= 2 or not isinstance(fn, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef)):
        return memo.get(key, False)
    memo[key] = False  # (while asked)
    nested = nested_sites(ctx, fn)  # NOTE [calls handing data]
    if not (sites := function_sites(ctx.analysis, fn) if nested is None else nested):
        return False
    hops[0] += 1  # (callers(), below, skips a call with a starred argument: then not all)
    try:
        given = list(callers(ctx, fn, name)) if nested is None else [
            (c, w, a) for c, w in nested if (a := ctx.analysis.arguments(fn, c).get(name))]
        memo[key] = len(given) == len(sites) and all(grad_off_call(ctx, c, w) or (
            not origins(ctx, w).trace(a, ctx.scope(w).statement_of(c), c.lineno).live)
            for c, w, a in given) and (nested is not None or foreign_sites(ctx, fn) == [])
    finally:
        hops[0] -= 1
    return memo[key]


def argument_returns(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Trace | None:
    """What the function ``fn`` of this file returns when its arguments carry nothing (its
    tracer with the arguments dead): the union of its returns' traces; None when a return may
    carry a graph of the function's own (a model, a global, ``self``), or ``fn`` is decorated,
    longer than 40 statements or returns nothing. One answer per function, for GT1 (a call
    is as live as its arguments: ``kl_divergence(mu.detach(), logvar.detach())`` is cut) and
    GT2 (called without arguments, nothing cut: data made from constants, ``x, y =
    get_batch()``)."""
    memo: dict[int, Trace | None] = ctx.memo("origins-argument-returns", ctx.tree, dict)
    key = id(fn)
    if key not in memo:
        memo[key] = None  # while analysing (recursion): may carry a graph
        memo[key] = _argument_returns(ctx, fn)
    return memo[key]


def _argument_returns(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef
                      ) -> Trace | None:
    if fn.decorator_list or len(fn.body) > 40:
        return None
    t = origins(ctx, fn, arguments_live=False)
    out = None
    for s in t.scope.stmts:
        if isinstance(s, ast.Return):
            if s.value is None or (tr := t.trace(s.value, s, s.lineno)).live:
                return None
            out = tr if out is None else out | tr
    return out


def helper_is_pure(ctx: Context, name: str) -> bool:
    """``name`` is a function at the top of this file whose results come from its arguments
    only (:func:`argument_returns`)."""
    fn = top_defs(ctx).get(name)
    return fn is not None and argument_returns(ctx, fn) is not None


def data_helper(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function of the file whose every return carries no graph and no cut, its arguments
    dead (:func:`argument_returns`): data made from factories and module constants."""
    got = argument_returns(ctx, fn)
    return got is not None and not got.cuts
