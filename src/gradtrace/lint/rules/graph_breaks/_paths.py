"""Where the loss comes from: the shared analysis behind the GT102-GT108 graph-break rules.

# NOTE [loss paths]
A value is *on the way to the loss* only if it flows, inside one function, into a **sink**:
the tensor on which ``.backward()`` is called (also ``scaler.scale(x).backward()``,
``accelerator.backward(x)``, ``self.manual_backward(x)``, ``torch.autograd.backward(x)``), or
the value returned by a function that is clearly a loss (``*_loss``, ``loss_fn``,
``compute_loss``, ``training_step``, ``forward``/``__call__`` of a ``*Loss`` class).

The sink is split into additive **terms** (``a + b - c``, ``loss += t``, through names bound
once). Each term is traced back through the names it is built from, and the trace says

* ``live``: some path reaches, without being cut, a value that may carry a graph (a model or
  unknown call, a parameter, a function argument, ``self.x``); unknown counts as live;
* ``cuts``: the places where a live value was turned into one without history
  (``.item()``, ``float()``, ``.tolist()``, ``.numpy()``, ``.detach()``, ``.data``,
  ``torch.tensor(t)``, ``argmax``, comparisons, ``round``, indicator ``torch.where``).

A term is *cut* when it is not live and has a cut. Only then do the rules speak:
the whole loss cut (backward raises the element-0 error, or trains nothing after a
``requires_grad`` band-aid), or one cut term next to live ones (that term adds nothing to any
gradient). A term that is a detached copy of a value also used live in the same sum
(``x - x.detach() + v.detach()`` value replacement) is taken as deliberate and never reported.
Multiplicative factors (``w.item() * loss``) are never reported: they scale a live loss.
The analysis of a function is memoised for the file and may be asked from another function's
visit (a caller reading its loss callee): the class it is in is read from the tree
(``file_parents.enclosing_class``), never from the engine's visit stack.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from gradtrace.lint.flow import NUMBER as FLOW_NUMBER
from gradtrace.lint.flow import NUMPY as FLOW_NUMPY
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.summed_terms import reduced, summed_entries
from gradtrace.lint.analysis.cuts import (  # noqa: F401 - re-exported for rules
    CUT_METHODS, DATA, DETACH, FRESH_METHODS, NO_HISTORY_METHODS, NONDIFF, NUMBER, NUMPY,
    REBUILD, RECV_ONLY, Cut, Trace, is_loss_class,
)
from gradtrace.lint.analysis.backpropagated import backpropagated
from gradtrace.lint.analysis.backpropagated_anywhere import backpropagated_anywhere
from gradtrace.lint.analysis.calls import named_calls
from gradtrace.lint.analysis.file_parents import enclosing_class
from gradtrace.lint.analysis.handed_entries import handed_entry_cuts
from gradtrace.lint.analysis.cuts import is_functional_loss
from gradtrace.lint.analysis.helper_cuts import HelperTracer, numbers_handed_back
from gradtrace.lint.analysis.lightning import auto_training_step
from gradtrace.lint.analysis.rebuilt_parts import rebuilt_parts
from gradtrace.lint.analysis.loss_evidence import loss_evidence
from gradtrace.lint.analysis.loss_weights import weight_only
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.graph_breaks._probed_leaf import probed_leaf

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

LOSS_FUNC_RE = re.compile(r"^(criterion|training_step|[a-z0-9_]*loss(es)?|"
                          r"_?loss_[a-z0-9_]+)$")
SKIP_FUNC_RE = re.compile(r"(^|_)(eval|evaluate|val|valid|validation|test|log|logging|"
                          r"metric|metrics|predict|score|report)(_|$)")


@dataclass(frozen=True)
class Sink:
    """A loss: the node that consumes it (``backward`` call or ``return``) and its value."""

    node: ast.AST
    value: ast.expr
    how: str                        # "backward" | "return"
    only: frozenset[str] | None = None  # report only these cut kinds (``forward`` returns)
    others: tuple[ast.expr, ...] = ()   # the other elements of a returned tuple


@dataclass
class Verdict:
    """What the analysis concludes for one sink."""

    sink: Sink
    full: bool                      # every term is cut: no gradient at all
    cut_terms: list[tuple[ast.expr, tuple[Cut, ...]]] = field(default_factory=list)
    part: bool = False              # a copy inside a live term (NOTE [rebuilt beside a live value])


class LossPaths(HelperTracer):
    """The loss-path analysis of one function scope (cached; see :func:`loss_paths`)."""

    def __init__(self, scope: Scope, ctx: Context) -> None:
        super().__init__(scope, ctx)
        self._named = False  # a loss function by its name only (NOTE [loss evidence])
        self.verdicts = [v for s in self.sinks() if (v := self._judge(s)) is not None]
        if self._named and self.verdicts and (loss_evidence(ctx, scope.node) is False
                                              or weight_only(ctx, scope.node)):
            self.verdicts = []  # asked only when something is cut: its callers decide
            # (NOTE [loss weights]: a factor weighing a term of each caller's loss)

    # -- sinks -------------------------------------------------------------------------------
    def sinks(self) -> list[Sink]:
        out: list[Sink] = []
        for b in step_calls(self.ctx, self.scope.node).losses():
            if not hasattr(b.stmt, "body"):  # simple statements only
                out.append(Sink(b.call, b.loss, "backward"))  # type: ignore[arg-type]
        node = self.scope.node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or out:
            return out  # a function that runs backward itself returns its loss only to log it
        only: frozenset[str] | None = None
        if id(node) in backpropagated(self.ctx):
            pass
        elif self._is_loss_func(node):
            self._named = True
        else:
            if node.name != "forward" or not self._in_module_class():
                return out
            only = frozenset({DATA})  # a module's output read through `.data`
        for s in self.scope.stmts:
            if isinstance(s, ast.Return) and s.value is not None:
                if isinstance(s.value, ast.Tuple) and s.value.elts and not self._from_loss_call(
                        s.value.elts[0], s.lineno) and any(
                        self._from_loss_call(e, s.lineno) for e in s.value.elts[1:]):
                    if only is not None:  # `return out, aux_loss`: a module hands its caller
                        out.extend(Sink(s, e, "return") for e in s.value.elts[1:]  # a loss
                                   if isinstance(e, ast.Name) and self._from_loss_call(e, s.lineno))
                    continue  # `return accuracy, loss`: the first element is not the loss
                others = tuple(s.value.elts[1:]) if isinstance(s.value, ast.Tuple) else ()
                out.extend(Sink(s, v, "return", only, others) for v in _returned_losses(s.value)
                           if not _python_truth(v))
        return out

    def _from_loss_call(self, e: ast.expr, line: int, depth: int = 0) -> bool:
        """``e`` is computed (through the function's bindings) from a torch loss function
        (``F.cross_entropy(...)``): a later element of the returned tuple is the loss, so the
        first one is something else (rasbt's ``compute_accuracy_and_loss`` returns the
        accuracy first)."""
        for n in walk(e):
            if isinstance(n, ast.Call) and is_functional_loss(
                    self.ctx.qualified_name(n.func) or ""):
                return True
            if depth < 3 and isinstance(n, ast.Name) and any(
                    b.value is not None and self._from_loss_call(b.value, b.line, depth + 1)
                    for b in self.scope.bindings_before(n.id, line)):
                return True
        return False

    def _in_module_class(self) -> bool:
        cls = enclosing_class(self.ctx, self.scope.node)
        if cls is None:
            return False
        for b in cls.bases:
            q = self.ctx.qualified_name(b) or dotted(b) or ""
            if q in ("torch.nn.Module", "nn.Module") or q.endswith("Module"):
                return True
        return False

    def _is_loss_func(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        name = node.name.lower()
        if SKIP_FUNC_RE.search(name) or id(node) in self.scope.no_grad or any(
                self.scope.grad_off_at(s) is not None for s in node.body[:1]):
            return False
        if isinstance(node.returns, ast.Name) and node.returns.id == "bool":
            return False  # a predicate (`def is_average_loss(self) -> bool`), not a loss
        if LOSS_FUNC_RE.match(name):
            if _script_metric(self.ctx, node) or _library_metric(self.ctx, node):
                return False
        elif name not in ("forward", "__call__") or \
                not is_loss_class(enclosing_class(self.ctx, node), self.ctx):
            return False
        return True  # the name only proposes: the evidence decides once something is cut

    # -- judging -----------------------------------------------------------------------------
    def _judge(self, sink: Sink) -> Verdict | None:
        if sink.how == "backward" and self.scope.kind(sink.value) in (FLOW_NUMBER, FLOW_NUMPY):
            return None  # a Python number has no .backward() at all: GT101's finding
        use = self.scope.statement_of(sink.node)
        line = sink.node.lineno  # type: ignore[attr-defined]
        self._term_at: dict[int, tuple[ast.stmt | None, int]] = {}
        terms = list(self._terms(sink.value, use, line, 0))
        traced = [(t, self.trace(t, *self._term_at.get(id(t), (use, line)))) for t in terms]
        ret = sink.how == "return"
        cut = [(t, tuple(c for c in tr.cuts if not (ret and self._running_total(c))
                         and (sink.only is None or self._layer_operand(c))))
               for t, tr in traced if not tr.live and tr.cuts]
        cut = [(t, cs) for t, cs in cut if cs and not (
            sink.how == "backward" and probed_leaf(self.scope, cs, line))]  # NOTE [probed leaf]
        if not cut and sink.how == "backward":  # NOTE [entry cut before the loss]
            cut = [(t, cs) for t, tr in traced if tr.live and (cs := handed_entry_cuts(
                self, t, *self._term_at.get(id(t), (use, line)), self._paths_of))]
        part = False
        if not cut and sink.only is None:  # NOTE [rebuilt beside a live value]
            cut = [(t, cs) for t, tr in traced if tr.live and (cs := rebuilt_parts(
                self, t, *self._term_at.get(id(t), (use, line))))]
            part = bool(cut)
        if not cut:
            return None
        if sink.others and any(self.trace(o, use, line).live for o in sink.others):
            # `return (r2 < s).float(), torch.fmin(r2, s)`: weights or a mask handed out next
            # to a differentiable value; which element is the loss is the caller's business
            cut = [(t, tuple(c for c in cs if c.kind != NONDIFF)) for t, cs in cut]
            cut = [(t, cs) for t, cs in cut if cs]
            if not cut:
                return None
        auto = sink.how == "return" and auto_training_step(self.ctx, self.scope.node)
        if auto and self.scope.kind(sink.value) in (FLOW_NUMBER, FLOW_NUMPY):
            return None  # Lightning refuses a number itself: MisconfigurationException
        if sink.how == "return" and not auto:
            # a function may return a number on purpose: callers decide; Lightning's
            # `training_step` returns the loss it backpropagates (NOTE [Lightning's backward])
            if sink.only is None and _cut_on_purpose(sink.value):
                return None  # (a module's `forward` returning `.data` is still GT105)
            keep = sink.only or frozenset({NUMPY, REBUILD, DATA, DETACH, NONDIFF})
            if sink.only is None and any(tr.live for _, tr in traced) and any(  # beside live
                    c.kind == NUMBER for _, cs in cut for c in cs) and backpropagated_anywhere(
                    self.ctx, self.scope.node):  # NOTE [backpropagated across files]
                keep = keep | {NUMBER}
            cut = [(t, tuple(c for c in cs if c.kind in keep)) for t, cs in cut]
            cut = [(t, cs) for t, cs in cut if cs]
            if not cut:
                return None
        full = all(not tr.live for _, tr in traced)
        if full and all(id(c.node) in numbers_handed_back(self.ctx) for _, cs in cut for c in cs):
            return None  # a number handed back by a call: no `.backward()` at all (GT101's)
        if not full and self._value_replacement(traced):
            return None
        return Verdict(sink, full, cut, part)

    def _paths_of(self, fn: ast.AST) -> LossPaths:
        return loss_paths(self.ctx, fn)

    def _layer_operand(self, c: Cut) -> bool:
        """In what ``forward`` returns, a cut matters when it cuts the output of one of the
        module's layers (``self.fc(x).data``); ``.data`` of a constant table built from sizes
        (``get_range_vector(n, device).data``) or of a parameter cuts no layer."""
        e: ast.AST = c.operand
        if isinstance(e, ast.Name):
            b = self.scope.binding_before(e.id, c.node.lineno)
            e = b.value if b is not None and b.value is not None else e
        return runs_layer(e)

    def _running_total(self, c: Cut) -> bool:
        """``total += loss.detach()`` in a function that returns ``total``: a running total
        handed out for logging (GT505's fix), not a loss term whose gradient is lost. (A
        running total that is then backwarded is still reported.)"""
        st = self.scope.statement_of(c.node)
        return isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) \
            and st.value is c.node and c.kind in (DETACH, NUMBER)

    def _value_replacement(self, traced: list[tuple[ast.expr, Trace]]) -> bool:
        """A detached term that only re-values what live terms already train: the same
        expression live elsewhere, or a whole additive term ``k(t, t).detach()`` whose every
        input also reaches the loss through a live term (MMD's teacher-only term: a constant
        offset on purpose; the inputs keep their gradient there), or a term reading a name
        bound detached that the live terms read too (``exp(z - m) - z * exp(-m) - exp(-m)``
        with ``m = m.detach()``: a stabilising shift, a constant everywhere on purpose)."""
        live_src = {self.ctx.source(t) for t, tr in traced if tr.live}
        live_names = {n.id for t, tr in traced if tr.live for n in walk(t)
                      if isinstance(n, ast.Name)}
        for t, tr in traced:
            if not tr.live:
                for c in tr.cuts:
                    if c.kind == DETACH and self.ctx.source(c.operand) in live_src:
                        return True
                    names = {n.id for n in walk(c.operand) if isinstance(n, ast.Name)} - {"self"}
                    if c.kind == DETACH and c.node is t and names and names <= live_names:
                        return True
                    if c.kind == DETACH and c.via and c.via[0][0] in live_names and \
                            c.via[0][0] in {n.id for n in walk(t) if isinstance(n, ast.Name)}:
                        return True  # `m = m.detach()` scales the live terms too: a constant
        return False

    def terms(self, e: ast.expr, use: ast.stmt | None, line: int) -> list[ast.expr]:
        """The additive terms of the loss ``e`` read at ``line`` (``a + 0.5 * b`` through
        names bound once)."""
        return list(self._terms(e, use, line, 0))

    def _terms(self, e: ast.expr, use: ast.stmt | None, line: int,
               depth: int) -> Iterable[ast.expr]:
        """Each term is read where its binding reads it (``use``, ``line``: recorded for
        :meth:`_judge`): ``loss = 1 - d.mean()`` then ``d = d.detach().numpy()`` before
        ``return loss, d`` reads the live ``d``."""
        for t in self._terms_in(e, use, line, depth):
            if t is e and hasattr(self, "_term_at"):
                self._term_at.setdefault(id(t), (use, line))
            yield t

    def _terms_in(self, e: ast.expr, use: ast.stmt | None, line: int,
                  depth: int) -> Iterable[ast.expr]:
        if depth > 8:
            yield e
            return
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            yield from self._terms(e.left, use, line, depth + 1)
            yield from self._terms(e.right, use, line, depth + 1)
            return
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Div)):
            if isinstance(e.right, ast.Constant) or isinstance(e.left, ast.Constant):
                inner = e.left if isinstance(e.right, ast.Constant) else e.right
                yield from self._terms(inner, use, line, depth + 1)
                return
        inner = reduced(e, self.ctx)  # NOTE [a reduction keeps the terms]
        if inner is not None:
            parts = list(self._terms(inner, use, line, depth + 1))
            at = getattr(self, "_term_at", {})
            # a term cut beside a live one; a loss cut whole is judged whole, once
            if len(parts) > 1 and any(self.trace(t, *at.get(id(t), (use, line))).live
                                      for t in parts):
                yield from parts
                return
        entries = summed_entries(self.ctx, self.scope, e, use, line)
        if entries is not None:  # `sum(losses.values())`: NOTE [summed dict of terms]
            for v, at, ln in entries:
                yield from self._terms(v, at, ln, depth + 1)
            return
        name = e.id if isinstance(e, ast.Name) else _self_attr(e)
        if name is not None:  # `loss`, or `self.loss_G` bound in the same method
            bs = self.bindings_at(name, use, line)
            if len(bs) == 1 and bs[0].value is not None:
                b = bs[0]
                if isinstance(b.stmt, ast.AugAssign):
                    if isinstance(b.stmt.op, (ast.Add, ast.Sub)):
                        yield from self._terms(e, b.stmt, b.line, depth + 1)
                        yield from self._terms(b.value, b.stmt, b.line, depth + 1)
                        return
                elif isinstance(b.stmt, (ast.Assign, ast.AnnAssign)) and (
                        isinstance(b.value, ast.BinOp) or summed_entries(
                            self.ctx, self.scope, b.value, b.stmt, b.line) is not None):
                    yield from self._terms(b.value, b.stmt, b.line, depth + 1)
                    return
        yield e


def _self_attr(e: ast.expr) -> str | None:
    """``self.<attr>`` spelled out, else None."""
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return "self." + e.attr
    return None


TENSOR_METHODS = RECV_ONLY | FRESH_METHODS | frozenset(CUT_METHODS) | {
    "add", "sub", "mul", "div", "matmul", "mm", "bmm", "clone", "masked_fill"}


def runs_layer(e: ast.AST) -> bool:
    """``self.encoder(x)``, ``self.blocks[i](x)``, ``self.head(self.body(x)).relu()``: a call of
    one of the module's layers (``self.scale.exp()``, ``self.w.to(x)`` are a parameter's
    methods)."""
    for n in walk(e):
        if isinstance(n, ast.Call):
            f = n.func
            while isinstance(f, ast.Subscript):
                f = f.value
            name = dotted(f) or ""
            if name.startswith("self.") and name.rpartition(".")[2] not in TENSOR_METHODS:
                return True
    return False


def _python_truth(v: ast.expr) -> bool:
    """``x in (a, b)``, ``x is None``: Python evaluates these to a bool, never a tensor."""
    return isinstance(v, ast.Compare) and all(
        isinstance(o, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for o in v.ops)


def _returned_losses(v: ast.expr) -> list[ast.expr]:
    if isinstance(v, ast.Tuple) and v.elts:
        return _returned_losses(v.elts[0])
    if isinstance(v, ast.Dict):
        return [val for k, val in zip(v.keys, v.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
                and k.value.startswith("loss")]
    if isinstance(v, ast.IfExp):
        return _returned_losses(v.body) + _returned_losses(v.orelse)
    if isinstance(v, ast.Constant):
        return []
    return [v]


def loss_paths(ctx: Context, node: ast.AST) -> LossPaths:
    """The loss-path analysis of the function or module ``node`` (cached for the file).

    Not in a WeakKeyDictionary keyed by the scope: the LossPaths value refers to its scope, so
    such an entry never goes away and kept every analysed file's tree alive.
    """
    return ctx.memo("gt1-loss-paths", node, lambda: LossPaths(ctx.scope(node), ctx))


def _cut_on_purpose(value: ast.expr) -> bool:
    """``return x.detach()`` / ``return x.item()`` / ``return x.data``: the whole returned value
    is cut by its outermost operation, so the function means to hand out a value without
    history (for logging or a report), not a loss to train on."""
    if isinstance(value, ast.Attribute):
        return value.attr == "data"
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
        and value.func.attr in NO_HISTORY_METHODS


def _script_metric(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function named like a loss that only the file's module-level code calls, in a file
    that runs no ``backward`` nor ``autograd.grad``: the script reports the number it returns
    (UniAudio's ``calculate_ms_stft_loss(args)``, printed); its callers decide
    (NOTE [backpropagated returns]), and none backpropagates."""
    if ctx.mentions("backward") or ctx.mentions("autograd") or fn not in ctx.tree.body:
        return False
    sites = named_calls(ctx, fn.name)
    return bool(sites) and all(where is ctx.tree for _, where in sites)


def _library_metric(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                    depth: int = 0) -> bool:
    """Every ``return`` of ``fn`` hands back what a function of a NumPy-side library computes
    (``sklearn.metrics.log_loss``, directly or through a name bound only to such a call):
    KGAT's ``logloss(ground_truth, prediction)`` wraps scikit-learn's metric, a number by
    design, not a torch loss whose path was cut on the way. NumPy calls, ``abs`` and slices
    count when every name they read is itself such a value, and a function of the file whose
    returns all are (RAVE's ``loss_wc``: ``np.max`` of ``np.convolve`` of a filter from
    ``kaiser_filter``, which returns SciPy's ``firwin``: the objective of ``scipy.optimize``)."""
    made: dict[str, list[ast.expr]] = {}
    rets: list[ast.expr | None] = []
    for n in walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name):
            made.setdefault(n.targets[0].id, []).append(n.value)
        elif isinstance(n, ast.Return):
            rets.append(n.value)
    return bool(rets) and all(r is not None and _library_side(ctx, r, made, set(), depth)
                              for r in rets)


def _library_side(ctx: Context, v: ast.expr, made: dict[str, list[ast.expr]],
                  seen: set[str], depth: int) -> bool:
    from gradtrace.lint.analysis.vocabulary import METRIC_LIBRARIES
    if isinstance(v, ast.Name):
        if v.id in seen:
            return True  # `g = abs(g[...])`: the name's other bindings decide
        if v.id not in made:
            return False  # a parameter: may be a tensor
        seen.add(v.id)
        return all(_library_side(ctx, x, made, seen, depth) for x in made[v.id])
    if isinstance(v, ast.Subscript):
        return _library_side(ctx, v.value, made, seen, depth)
    if not isinstance(v, ast.Call):
        return False
    q = ctx.qualified_name(v.func) or ""
    root = q.partition(".")[0]
    if root in METRIC_LIBRARIES:
        return True
    if root == "numpy" or q == "abs":
        args = [*v.args, *(k.value for k in v.keywords)]
        return bool(args) and all(isinstance(a, ast.Constant) or _library_side(
            ctx, a, made, seen, depth) for a in args)
    fn = ctx.analysis.functions.get(v.func.id) if isinstance(v.func, ast.Name) else None
    return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and depth < 2 \
        and _library_metric(ctx, fn, depth + 1)
