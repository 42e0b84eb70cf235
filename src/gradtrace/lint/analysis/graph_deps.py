"""Which earlier bindings a value is computed from, and which of them hold an autograd graph.

# NOTE [graph-carrying bindings]
A binding *carries a graph* when its value calls something that looks like a trainable module
(bound to an ``nn.Module`` in this file, or spelled like one: ``model``, ``encoder``,
``netG``, ``self.rnn``, ...) outside any ``.detach()`` / ``.item()`` and outside
``no_grad``, or when it is computed from such a binding. Data prepared from a loader
(``x = batch.to(device)``) carries none. The GT505-GT509 rules only speak about values that
carry a graph by this definition, which keeps them silent on plain data and numbers.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Iterator

from gradtrace.lint.analysis.built_callables import built_and_called
from gradtrace.lint.analysis.caller_grad import caller_grad_off
from gradtrace.lint.analysis.cuts import (
    DETACHING_METHODS, FRESH_FUNCS, LEAF_CALLS, NON_VALUE_ATTRS, NUMBER_FUNCS, TEMPLATE_METHODS,
    TENSOR_METHODS, TEXT_DECODE_KWARGS, indices_of_pair, unpacks_indices)
from gradtrace.lint.analysis.flag_arms import known_flags, plain_in_arm
from gradtrace.lint.analysis.method_freezes import frozen_callee
from gradtrace.lint.analysis.grad_off_returns import returns_off
from gradtrace.lint.analysis.handed_back import carried_as_given
from gradtrace.lint.analysis.graphless_returns import plain_return, text_method
from gradtrace.lint.analysis.param_cuts import CutParams, cut_params, instance_skips
from gradtrace.lint.analysis.plain_classes import module_method
from gradtrace.lint.analysis.project import foreign_callee, foreign_method, home
from gradtrace.lint.analysis.grad_inputs import (
    alias_chain, parameters_of, reads_module, reads_weights, weight_inputs)
from gradtrace.lint.analysis.int_values import integer_valued
from gradtrace.lint.analysis.reach import called_function, reaching, value_of
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.analysis.steps import Backward, plain_grads, step_calls, step_of
from gradtrace.lint.analysis.model_calls import bound_module, model_calls, module_like, runs_model
from gradtrace.lint.context import Context
from gradtrace.lint.flow import MODULE, OPTIMIZER, PARAMS, Binding, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, child_nodes

# the keywords of ``Tensor.backward``: a ``backward(...)`` method taking others is not its
BACKWARD_KEYWORDS = frozenset({"gradient", "retain_graph", "create_graph", "inputs"})
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


# methods whose result is computed from the receiver's tensors: a module's forward, a
# torch.distributions object's densities (its parameters, and what it cached from them)
VALUE_OF_OBJECT = frozenset({"forward", "__call__", "log_prob", "entropy", "rsample"})


def loads(expr: ast.AST, cut: CutParams | None = None,
          opaque: Callable[[ast.Call], bool] | None = None,
          skips: Callable[[ast.Call], Skips | None] | None = None
          ) -> Iterator[tuple[str, ast.AST]]:
    """Dotted names whose values flow into ``expr`` (callees and detached parts excluded;
    with ``cut`` from :func:`cut_params`, also the arguments a helper of this file cuts
    (NOTE [parameter cuts]); with ``opaque``, the arguments of the calls it accepts; with
    ``skips``, the arguments a module of another file leaves unread)."""
    stack = [expr]
    while stack:
        n = stack.pop()
        if indices_of_pair(n):
            continue  # `torch.max(out, 1)[1]`, `.indices`: an integer tensor, no history
        if isinstance(n, ast.Call):
            f = n.func
            if dotted(f) in FRESH_FUNCS or dotted(f) in LEAF_CALLS or plain_grads(n):
                continue  # a new tensor: its arguments are shapes and templates, not inputs
            if any(k.arg in TEXT_DECODE_KWARGS for k in n.keywords) or text_method(n):
                continue  # `decode(ids, skip_special_tokens=True)`, `"".join(...)`: text
            if cut is not None and isinstance(f, ast.Name) \
                    and (cuts := cut.get(f.id)) is not None:
                stack.extend(a for i, a in enumerate(n.args) if i not in cuts)
                stack.extend(k.value for k in n.keywords)
                continue
            if cut is not None and not any(isinstance(a, ast.Starred) for a in n.args) \
                    and (cuts := cut.foreign_cuts(f)) is not None:  # a helper of another file
                stack.extend(a for i, a in enumerate(n.args) if i not in cuts)
                stack.extend(k.value for k in n.keywords)
                continue
            fwd = cut.forward_skips(f.attr) if cut is not None and isinstance(
                f, ast.Attribute) and dotted(f.value) == "self" else None
            if fwd is None and skips is not None and isinstance(f, ast.Name):
                fwd = skips(n)  # `crit(...)`, a module of another file
            if fwd is not None:
                # `self.loss(...)`, a module of this file: only what its forward reads
                names, unused = fwd
                stack.extend(a for i, a in enumerate(n.args)
                             if i >= len(names) or names[i] not in unused)
                stack.extend(k.value for k in n.keywords if k.arg not in unused)
                continue
            if cut is not None and isinstance(f, ast.Attribute) and dotted(f.value) == "self" \
                    and not any(isinstance(a, ast.Starred) for a in n.args) \
                    and (cuts := cut.method_cuts(f.attr)) is not None:
                stack.extend(a for i, a in enumerate(n.args) if i not in cuts)  # a method's
                stack.extend(k.value for k in n.keywords)  # cut parameters (NOTE above)
                continue
            if isinstance(f, ast.Attribute):
                if f.attr in DETACHING_METHODS or opaque is not None and opaque(n):
                    continue
                if f.attr in TEMPLATE_METHODS:
                    stack.append(f.value)  # the argument is a shape/dtype template only
                    continue
                if f.attr in TENSOR_METHODS or f.attr in VALUE_OF_OBJECT:
                    stack.append(f.value)  # a value's method; other receivers are objects
                elif not isinstance(f.value, (ast.Name, ast.Attribute)):
                    stack.append(f.value)
            elif isinstance(f, ast.Name) and (f.id in NUMBER_FUNCS
                                              or opaque is not None and opaque(n)):
                continue
            stack.extend(n.args)
            stack.extend(k.value for k in n.keywords)
        elif isinstance(n, (ast.Attribute, ast.Name)):
            if isinstance(n, ast.Attribute) and n.attr in NON_VALUE_ATTRS:
                continue
            d = dotted(n)
            if d is not None:
                yield d, n
            elif isinstance(n, ast.Attribute):
                stack.append(n.value)
        elif isinstance(n, COMPREHENSIONS):
            yield from comprehension_loads(n, lambda e: loads(e, cut, opaque, skips))
        elif not isinstance(n, (ast.Lambda, ast.expr_context, ast.Compare)):
            stack.extend(child_nodes(n))


def _stepped(scope: Scope, c: ast.Call, line: int) -> bool:
    """``opt.step(...)``: what an optimizer's step returns is its closure's new loss (or
    None), not a graph of its arguments (a line search given ``'current_loss': obj``)."""
    return isinstance(c.func, ast.Attribute) and step_of(c, scope, line) is not None


def followed_value(b: Binding, ctx: Context) -> ast.expr | None:
    """The value a graph may reach ``b`` from: none under grad-off (also the caller's:
    NOTE [grad turned on by the function]), none for the indices of a (values, indices) pair
    (``_, pred = out.max(1)``: an index tensor, without a graph)."""
    return None if b.no_grad or caller_grad_off(b, ctx) or unpacks_indices(
        b.stmt, b.name, ctx) else value_of(b)


@dataclass
class Deps:
    """The bindings a value depends on, and the module calls that consumed a name."""

    bindings: list[Binding] = field(default_factory=list)
    consumers: list[tuple[str, str, ast.Call]] = field(default_factory=list)  # callee, arg, call


Skips = tuple[list[str], frozenset[str]]  # a forward's parameters, those it leaves unread
Edges = tuple[list[tuple[str, str, ast.Call]], list[Binding]]  # (consumers, bindings read)


def _imported_no_input(ctx: Context, scope: Scope, callee: str, call: ast.Call,
                       line: int) -> bool:
    """``conf = models_genesis_config()``: a bare name bound by an import (of another file) and
    by nothing here, called with no argument: it builds or fetches an object (not a forward)."""
    imp = ctx.imports
    return not call.args and not call.keywords and "." not in callee \
        and (callee in imp.aliases or callee in imp.package) \
        and not (imp.aliases.get(callee) or "").startswith("torch") \
        and all(isinstance(b.stmt, (ast.Import, ast.ImportFrom))
                for sc in (scope, ctx.scope(ctx.tree)) for b in sc.bindings_before(callee, line))


class Graphs:
    """Dependency and graph-carrying queries over one function's :class:`Scope`.

    # NOTE [dependency graph]
    Read once, lazily: for each value (an expression at a line) the module calls it makes and
    the bindings its names read (:meth:`_reads`: one :func:`loads` walk per value). A query
    (:meth:`deps`) walks these edges with its own visited set: no value is walked twice."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self._direct: dict[int, bool] = {}
        self._carries: dict[int, bool] = {}
        self._deps: dict[tuple[int, int], Deps] = {}
        self._backpropagated: set[int] | None = None
        self._edges: dict[tuple[int, int], Edges] = {}
        self._cut = cut_params(scope.ctx)

    def deps(self, expr: ast.AST, line: int) -> Deps:
        """Bindings reached from ``expr`` (evaluated at ``line``), transitively (cached: the
        rules ask it for every pair of backward calls and accumulations of a script)."""
        out = self._deps.get(key := (id(expr), line))
        if out is None:
            out = self._deps[key] = self._deps_of(expr, line)
        return out

    def _deps_of(self, expr: ast.AST, line: int) -> Deps:
        out = Deps()
        seen: set[int] = set()
        work: list[tuple[ast.AST, int]] = [(expr, line)]
        while work:
            e, ln = work.pop()
            consumers, bound = self._reads(e, ln)
            out.consumers.extend(consumers)
            for b in bound:
                if id(b) in seen:
                    continue
                seen.add(id(b))
                out.bindings.append(b)
                v = followed_value(b, self.ctx)
                if v is None or self.plain_result(b):
                    continue  # a result made with grad off: no graph flows through it
                work.append((v, b.line))
                if isinstance(b.stmt, ast.AugAssign):
                    work.append((b.stmt.target, b.line))
        return out

    def _reads(self, e: ast.AST, line: int) -> Edges:
        """The module-like calls of ``e`` with each argument, and the bindings its names read
        at ``line`` (NOTE [dependency graph])."""
        key = (id(e), line)
        hit = self._edges.get(key)
        if hit is None:
            consumers = [(callee, dotted(a) or "<expr>", call)
                         for callee, call in model_calls(e) for a in call.args]
            bound = [b for name, _ in loads(e, self._cut, opaque=lambda c: _stepped(
                self.scope, c, line), skips=lambda c: instance_skips(
                self.ctx, self.scope, c, line)) for b in reaching(self.scope, name, line,
                                                                 prefix=True)]
            hit = self._edges[key] = (consumers, bound)
        return hit

    def direct(self, b: Binding) -> bool:
        """The binding's own value calls a module-like callee (NOTE [graph-carrying bindings])."""
        if id(b) not in self._direct:
            v = followed_value(b, self.ctx)
            self._direct[id(b)] = False  # cycle guard (a helper that calls itself)
            self._direct[id(b)] = v is not None and b.kind not in (MODULE, OPTIMIZER, PARAMS) \
                and not self.plain_result(b) and not built_and_called(self.scope, b) and (any(
                    self._runs_model(c, call, b.line) for c, call in model_calls(v))
                    or self.helper_result(b) or self.backpropagated(b))
        return self._direct[id(b)]

    def _runs_model(self, callee: str, call: ast.Call, line: int) -> bool:
        """A module-like call; a function of this file (not a module's ``forward``, nor a plain
        class's: NOTE [plain classes]) that is module-like by its spelling alone (pymarl2's
        ``self.train_critic_best(batch)``) runs a model when what it returns carries a graph in
        its own scope (NOTE [helper results]), or when it is handed a tensor made to require
        grad (``conv1d_ref(sig, taps)``, ``taps = torch.tensor(..., requires_grad=True)``)."""
        if any(k.arg in TEXT_DECODE_KWARGS for k in call.keywords):
            return False  # `model.decode(ids, skip_special_tokens=True)`: text
        if not runs_model(self.ctx, self.scope, callee, line) or _imported_no_input(
                self.ctx, self.scope, callee, call, line) \
                or frozen_callee(self.ctx, self.scope, callee, line):  # NOTE [frozen by a method]
            return False
        fn = called_function(call, self.scope, line) or foreign_callee(
            self.ctx, call, self.scope, line)  # NOTE [project index]
        if module_method(self.ctx, fn, callee, self.scope.node) \
                or bound_module(self.ctx, self.scope, callee, line):
            return True
        return fn is not None and (returns_graph(home(self.ctx, fn), fn, None, 0) or any(
            _grad_leaf(self.scope.binding_before(a.id, line)) for a in call.args
            if isinstance(a, ast.Name)))

    def backpropagated(self, b: Binding) -> bool:
        """``loss = loss_function(); loss.backward()``: the binding is what a ``backward()`` of
        this function differentiates, so it holds a graph whatever made it (a callable passed
        in, a function of another file): ``backward()`` on a tensor without one raises."""
        if self._backpropagated is None:
            self._backpropagated = set()
            for bw in step_calls(self.ctx, self.scope.node).losses():
                f = bw.call.func
                if isinstance(bw.loss, ast.Name) and isinstance(f, ast.Attribute) \
                        and f.value is bw.loss and f.attr == "backward" \
                        and len(bw.call.args) <= 1 \
                        and all(k.arg in BACKWARD_KEYWORDS for k in bw.call.keywords):
                    got = self.scope.binding_before(bw.loss.id, bw.stmt.lineno)
                    if got is not None and isinstance(value_of(got), ast.Call) and \
                            getattr(value_of(got).func, "attr", None) not in TENSOR_METHODS:
                        self._backpropagated.add(id(got))
        return id(b) in self._backpropagated

    def helper_result(self, b: Binding) -> bool:
        """``loss, l1, l2 = compute_loss(data)``: the element ``b`` takes from what a function
        of this file returns carries a graph there (NOTE [helper results])."""
        s = b.stmt
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.value, ast.Call)):
            return False
        fn = called_function(s.value, self.scope, b.line) or foreign_callee(
            self.ctx, s.value, self.scope, b.line)  # NOTE [project index]
        target = s.targets[0]
        if fn is None or fn is self.scope.node:
            return False
        ctx = home(self.ctx, fn)
        if isinstance(target, ast.Tuple):
            names = [dotted(e) for e in target.elts]
            if b.name not in names or any(isinstance(e, ast.Starred) for e in target.elts):
                return False
            return returns_graph(ctx, fn, names.index(b.name), len(names))
        return dotted(target) == b.name and returns_graph(ctx, fn, None, 0)

    def carries(self, b: Binding) -> bool:
        """The binding holds a graph: it calls a module, or is computed from what does."""
        if id(b) not in self._carries:
            self._carries[id(b)] = False  # cycle guard
            v = followed_value(b, self.ctx)
            ok = self.direct(b) or (v is not None and not self.plain_result(b) and any(
                self.direct(d) for d in self.deps(v, b.line).bindings))
            self._carries[id(b)] = ok
        return self._carries[id(b)]

    def plain_result(self, b: Binding) -> bool:
        """``out, _, ratio = model(data)``: the element ``b`` takes from what a function (or a
        module's ``forward``) of this file returns is, in every ``return``, computed from no
        tensor's history (``out.size(0) / x.size(0)``, a constant), or made by a function run
        with grad off (NOTE [no-grad helpers]; then also ``p = stats(x, p)``)."""
        s, ctx = b.stmt, self.ctx
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.value, ast.Call)):
            return False
        if carried_as_given(ctx, self.scope, b):  # NOTE [handed back as given]
            return True
        fn = called_function(s.value, self.scope, b.line) or foreign_callee(
            ctx, s.value, self.scope, b.line) or foreign_method(
            ctx, s.value, self.scope, b.line)  # NOTE [project index]
        ctx = home(ctx, fn)
        if not isinstance(s.targets[0], ast.Tuple):  # NOTE [no-grad helpers]
            return dotted(s.targets[0]) == b.name and plain_return(ctx, fn)
        names = [dotted(e) for e in s.targets[0].elts]
        if b.name not in names or any(isinstance(e, ast.Starred) for e in s.targets[0].elts):
            return False
        i = names.index(b.name)  # or the arm the call's flags select (NOTE [asserted flags])
        return _plain_element(ctx, fn, i, len(names), 0) or plain_in_arm(
            ctx, fn, known_flags(self.ctx, self.scope, s.value, fn), i, len(names), loads)

    def freed_by(self, bw: Backward, b: Binding) -> bool:
        """Whether the backward ``bw`` frees the graph that binding ``b`` holds.

        # NOTE [grad inputs]
        ``torch.autograd.grad(out, inputs)`` (and ``backward(inputs=...)``) runs only the
        nodes on the paths from ``out`` to ``inputs``: what ``inputs`` are computed from keeps
        its saved tensors (PyTorch runs no node it does not need). So when the inputs are
        plain local names, a binding is freed only if it is computed from one of them (the
        inputs themselves are not: their own ``grad_fn`` does not run). Inputs spelled any other
        way (an attribute, a list built elsewhere) are taken to reach everything, but for the
        parameters of one module (:func:`.grad_inputs.parameters_of`).
        """
        if bw.inputs is None:
            return True
        owner = parameters_of(bw.inputs)
        if owner is not None:
            v = value_of(b)
            return v is None or reads_module(
                [v, *(value_of(x) for x in self.deps(v, b.line).bindings)], owner)
        names = bw.inputs.elts if isinstance(bw.inputs, (ast.Tuple, ast.List)) else [bw.inputs]
        line = bw.stmt.lineno if bw.stmt is not None else bw.call.lineno
        if not all(isinstance(n, ast.Name) for n in names):
            # `[vq.embed.weight, vq.proj.weight]`: module weights (the encoder before `vq`
            # keeps its saved tensors)
            weights = weight_inputs(bw.inputs, lambda d: alias_chain(self.scope, d, line))
            v = value_of(b)
            if weights is None or v is None:
                return True
            return reads_weights([v, *(value_of(x) for x in self.deps(v, b.line).bindings)],
                                 weights, lambda d: alias_chain(self.scope, d, line))
        inputs = {id(x) for n in names  # type: ignore[attr-defined]
                  for x in reaching(self.scope, n.id, line, prefix=True)}
        v = value_of(b)
        return id(b) not in inputs and v is not None and any(
            id(d) in inputs for d in self.deps(v, b.line).bindings)

    def first_module_call(self, b: Binding) -> str | None:
        """The callee of the first module-like call in the binding's value."""
        v = value_of(b)
        for callee, _ in model_calls(v) if v is not None else ():
            if module_like(self.ctx, self.scope, callee, b.line):
                return callee
        return None


def _grad_leaf(b: Binding | None) -> bool:
    """``b`` binds a tensor made to require grad: ``torch.tensor(..., requires_grad=True)``,
    ``nn.Parameter(t)``, ``t.requires_grad_()``."""
    v = value_of(b) if b is not None else None
    if not isinstance(v, ast.Call):
        return False
    name = dotted(v.func) or ""
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in v.keywords) \
        or name.rpartition(".")[2] == "Parameter" or name.endswith("requires_grad_") and not (
            v.args and isinstance(v.args[0], ast.Constant) and v.args[0].value is False)


def returns_graph(ctx: Context, fn: ast.AST, index: int | None, width: int) -> bool:
    """Whether every ``return`` of the function ``fn`` of this file gives back a graph: its
    value (with ``index``: element ``index`` of a tuple of ``width`` elements) carries one in
    ``fn``'s own scope (NOTE [helper results]).

    # NOTE [helper results]
    A binding made by calling a function of the file (a helper, ``self.method(...)``, a static
    method) carries a graph when what that function returns does, read in the function's own
    scope by the same definition (NOTE [graph-carrying bindings]): ``loss_total, loss_chords
    = compute_loss(data)`` where ``compute_loss`` runs the model and returns two of its losses.
    Every ``return`` must give a graph-carrying value at that position (a bare ``return`` or
    ``return None`` is skipped, one other return that is not a tuple of that width decides
    no); a return under grad-off, detached, or a Python number (``.item()``, an accuracy
    from ``argmax``/``==``) carries none. Helpers are followed through helpers; a cycle reads
    as no graph."""
    memo: dict[tuple[int, int | None, int], bool]
    memo = ctx.memo("helper-returns-graph", ctx.tree, dict)
    key = (id(fn), index, width)
    if key in memo:
        return memo[key]
    memo[key] = False  # cycle guard
    scope = ctx.scope(fn)
    g = graphs(scope)
    found = False
    for r in returns(fn.body):  # type: ignore[attr-defined]
        if r.value is None or (
                isinstance(r.value, ast.Constant) and r.value.value is None):
            continue
        e: ast.expr | None = r.value
        if index is not None:
            e = r.value.elts[index] if isinstance(r.value, ast.Tuple) \
                and len(r.value.elts) == width else None
        if e is None or scope.grad_off_at(r) is not None or not (
                any(runs_model(ctx, scope, c, r.lineno) for c, _ in model_calls(e))
                or any(g.direct(d) for d in g.deps(e, r.lineno).bindings)):
            memo[key] = False
            return False
        found = True
    memo[key] = found
    return found


def _plain_element(ctx: Context, fn: ast.AST | None, i: int, width: int, depth: int) -> bool:
    """Element ``i`` of the ``width``-tuple every ``return`` of ``fn`` gives back has no
    history (:func:`_historyless`: ``new_points.detach()``, a size), or is made with grad off;
    a ``return`` handing back what a function of ``fn``'s file returns (``return
    loss_calculation(pred, points)`` in a loss module's ``forward``) is read in that function,
    three calls deep at most."""
    if fn is None or depth > 3:
        return False
    if returns_off(ctx, fn, i, width) is not None:
        return True
    rets = [r for r in bfs_walk(fn) if isinstance(r, ast.Return)]
    if not rets:
        return False
    for r in rets:
        v = r.value
        if isinstance(v, ast.Tuple) and len(v.elts) == width:
            if not _historyless(ctx, fn, v.elts[i]):
                return False
            continue
        inner = called_function(v, ctx.scope(fn), r.lineno) \
            if isinstance(v, ast.Call) else None
        if inner is None or inner is fn or not _plain_element(ctx, inner, i, width, depth + 1):
            return False
    return True


def _historyless(ctx: Context, fn: ast.AST, e: ast.expr) -> bool:
    """``e`` (or, for a name, each value ``fn`` binds it to) reads no tensor and calls
    nothing that could run a model: sizes, shapes, constants, numbers."""
    values: list[ast.expr | None] = [e]
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and integer_valued(e, fn):
        return True  # `ind` of `_, ind = dist.max(1)`: int64 indices have no history
    if isinstance(e, ast.Name):
        bs = ctx.scope(fn).bindings.get(e.id, ())
        if not bs:
            return False
        values = [value_of(b) for b in bs]
    return all(v is not None and not any(True for _ in loads(v))
               and not any(True for _ in model_calls(v)) for v in values)


def graphs(scope: Scope) -> Graphs:
    """The (cached) :class:`Graphs` of a function's scope."""
    return scope.ctx.memo("gt5-graphs", scope.node, lambda: Graphs(scope))


def comprehension_loads(n: ast.AST, loads: Callable[[ast.AST], Iterator[tuple[str, ast.AST]]]
                        ) -> Iterator[tuple[str, ast.AST]]:
    """``tuple(x.detach() for x in parts)``: what is iterated flows into the result only when
    the element reads a loop variable outside a detaching call (``loads`` walks one
    expression, cuts excluded); the loop variables are not names of the enclosing function."""
    gens = n.generators  # type: ignore[attr-defined]
    own = {t.id for g in gens for t in bfs_walk(g.target) if isinstance(t, ast.Name)}
    elts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]  # type: ignore[attr-defined]
    flows = False
    for e in elts:
        for d, node in loads(e):
            if d.partition(".")[0] in own:
                flows = True
            else:
                yield d, node
    if flows:
        for g in gens:
            yield from ((d, node) for d, node in loads(g.iter) if d.partition(".")[0] not in own)
