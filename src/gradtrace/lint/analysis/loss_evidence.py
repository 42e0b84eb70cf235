"""Whether a function named like a loss is one: the code's evidence, not its name.

# NOTE [loss evidence]
A function is a loss function by what is done with its result, not by its spelling
(``loss_wc``, ``logloss``, ``compute_ms_stft_loss`` are NumPy/SciPy objectives and metrics
nothing backpropagates). :func:`loss_evidence` answers for a function (or the ``forward`` of a
class) the loss-path rules would take for a loss by its name:

* True: a call of it reaches a backward (``.backward()``, ``autograd.grad``, a trainer's
  ``manual_backward``/``accelerator.backward``: :mod:`.steps`) in the function making the call
  (through the names the backpropagated value is built from, the lists it is appended to),
  or is returned by a function that itself reaches one or by ``training_step`` (Lightning
  backpropagates what it returns); or a call of it is handed a graph (a model output, a value
  of kind graph); or, in another file of the project that imports it, such a call
  (:func:`.loss_callers.project_evidence`); ``training_step`` itself is the protocol's loss;
* False: every call the file makes is known and none does that, and the project's other
  files that mention it call it nowhere such (or nowhere at all); a call whose value is
  handed straight to ``self.log(...)``/``self.log_dict(...)`` only logs it;
* None: a call's value flows into the return of a function whose own evidence is unknown (a
  model's ``forward`` returning its loss to a trainer out of sight); or no code fact at all
  (the function is also used as a value: handed to a trainer as ``loss_fn=f``; a lone
  function of a one-file project nothing calls; a project too large to search): only then
  does the name decide (the last resort of
  :mod:`~gradtrace.lint.analysis.vocabulary`).

A parameter spelled like a target (``TARGET_RE``) is data only when no call of the function
in the file hands it a graph (:func:`passed_graph`, read by the shared tracer of
:mod:`.origins`).

Decisions of the graph-break and graph-lifetime rules that still rest on a name (session 33,
docs/triage/evidence33.md): ``LOSS_FUNC_RE`` and a class spelled ``*Loss``/``*Criterion``
propose the candidates and decide when the answer above is None; ``SKIP_FUNC_RE`` (an
``eval``/``metric``/``test`` function is never a loss: it silences); ``TARGET_RE`` with no call
in sight; ``cuts._pure_loss_name`` (an unbound ``criterion``/``self.loss_fn`` is a loss without
parameters of its own); ``arg_roles._loss_callee`` (a callee spelled like a loss takes the
prediction first: it silences); ``DATA_ITER_RE`` (a loop over ``loader``/``range(`` yields
data); the spelling fallback of ``model_calls.module_like`` (a callee of unknown kind spelled
like a model runs one: the GT5 dependency walk); GT601's ``*opt*`` receiver of unknown kind;
GT507's ``repackage``/``detach``/``freeze`` words and generator/discriminator roles
(silencing).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import function_sites, module_sites, object_sites
from gradtrace.lint.analysis.calls import call_sites, named_calls
from gradtrace.lint.analysis.loss_callers import project_evidence, subclassed
from gradtrace.lint.analysis.numpy_fed import numpy_fed
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.analysis.vocabulary import EVAL_STEP_METHODS, STEP_METHOD
from gradtrace.lint.flow import GRAPH, MODULE
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
MAX_HOPS = 2  # functions returning the call's value, up to a backward
_FILLS = frozenset({"append", "extend", "insert", "add"})


def loss_evidence(ctx: Context, fn: Fn, hops: int = 0) -> bool | None:
    """NOTE [loss evidence]: True, False or None for the function ``fn`` of ``ctx``'s file."""
    memo: dict = ctx.memo("loss-evidence", ctx.tree, dict)
    key = (id(fn), hops)
    if key in memo:
        return memo[key]  # type: ignore[no-any-return]
    memo[key] = None  # guard: a function reached again through its own callers
    got = memo[key] = _evidence(ctx, fn, hops)
    return got


def _evidence(ctx: Context, fn: Fn, hops: int) -> bool | None:
    if fn.name == STEP_METHOD:  # Lightning backpropagates what it returns; a step that runs
        return not backwards_itself(ctx, fn)  # backward itself returns a number to log
    cls = ctx.analysis.class_of(fn)
    if _registered(fn) or cls is not None and cls.node is not None and _registered(cls.node):
        return None  # `@LOSSES.register_module()`: built from a config, by a registry
    sites = _sites(ctx, fn)
    if sites is None:
        return None  # also used as a value: where it goes is not seen
    unknown = not sites
    for call, where in sites:
        got = False if numpy_fed(ctx, fn, call, where) else _judge(ctx, where, call, hops)
        if got:
            return True
        unknown = unknown or got is None
    if hops > 1:
        return None if unknown else False
    other = project_evidence(ctx, fn, _judge)
    if other is not None and (other or not sites or not unknown):
        return other
    return None if unknown else False


def backwards_itself(ctx: Context, fn: Fn) -> bool:
    """``fn`` runs a backward that fills ``.grad``, in its body or in a method of its class it
    calls (``self._forward_backward(...)``): a ``transformers.Trainer.training_step`` override
    (the trainer steps after it and only logs what it returns), not Lightning's protocol."""
    cls = ctx.analysis.class_of(fn)
    todo: list[ast.AST] = [fn]
    for n in walk(fn):
        if cls is not None and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == "self" and n.func.attr in cls.methods:
            todo.append(cls.methods[n.func.attr])
    return any(b.accumulates for node in todo for b in step_calls(ctx, node).backwards)


def _judge(ctx: Context, where: ast.AST, call: ast.Call, hops: int = 0) -> bool | None:
    """One call: its value reaches a backward, or it is handed a graph (True); or it flows
    into the return of a function whose own evidence is unknown (None)."""
    if logged_value(ctx, where, call):
        return False  # `self.log_dict(self._get_logging_losses(...))`: a value to log
    got = reaches_backward(ctx, where, call, hops)
    return True if got or graph_fed(ctx, where, call) else got


LOG_METHODS = frozenset({"log", "log_dict"})  # Lightning's `LightningModule.log*`


def logged_value(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """The call's value is handed straight to ``self.log(...)``/``self.log_dict(...)`` as
    the statement's whole work: logged, never backpropagated (even when it is handed the
    step's losses to report them)."""
    st = ctx.scope(where).statement_of(call)
    v = st.value if isinstance(st, ast.Expr) else None
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
        and v.func.attr in LOG_METHODS and dotted(v.func.value) == "self" \
        and any(a is call for a in (*v.args, *(k.value for k in v.keywords)))


_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "torch.no_grad",
                               "torch.enable_grad", "torch.inference_mode"})


def _registered(node: ast.AST) -> bool:
    """A decorator other than the plain ones hands the definition to someone else."""
    for d in getattr(node, "decorator_list", ()):
        f = d.func if isinstance(d, ast.Call) else d
        if (dotted(f) or "") not in _PLAIN_DECORATORS:
            return True
    return False


def _sites(ctx: Context, fn: Fn) -> list[tuple[ast.Call, ast.AST]] | None:
    """The calls of ``fn`` in the file (a loss class's ``forward``/``__call__``: the calls of
    its instances); None when ``fn`` is also used without a call we see."""
    a = ctx.analysis
    cls = a.class_of(fn)
    if cls is not None and fn.name in ("forward", "__call__"):
        if subclassed(ctx, cls.name):
            return None  # its `forward` runs for the instances of a subclass too
        sites = module_sites(a, cls.name) if cls.is_module else object_sites(a, cls.name)
        if not sites and cls.node is not None:
            return None if named_calls(ctx, cls.name) else []  # built, called unseen
        return sites
    got = function_sites(a, fn)
    if got is None and cls is None and a.functions.get(fn.name) is fn:
        got = _shadowed_sites(ctx, fn.name)
    return got


_NUMERIC_ROOTS = frozenset({"numpy", "scipy", "sklearn"})


def _shadowed_sites(ctx: Context, name: str) -> list[tuple[ast.Call, ast.AST]] | None:
    """The calls of the top-level function ``name`` when every other use of the name reads a
    local variable of the same spelling (KGAT's ``logloss = log_loss(...)`` inside ``def
    logloss``) or hands the function to a NumPy-side library (``scipy.optimize.fmin(f, x0)``:
    it minimises a number); None when it is used as a value anywhere else."""
    calls: list[tuple[ast.Call, ast.AST]] = []
    for call, _, outer in call_sites(ctx, name):
        where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
        if isinstance(call.func, ast.Name) and (where is ctx.tree or name not in ctx.scope(
                where).bindings):
            calls.append((call, where))
    funcs = {id(c.func) for c, _, _ in call_sites(ctx, name)}
    for where in (ctx.tree, *(n for n in walk(ctx.tree) if isinstance(n, FUNCTION_TYPES))):
        local = where is not ctx.tree and name in ctx.scope(where).bindings
        for n in _own_loads(where, name):
            if id(n) in funcs or local:
                continue
            if not _numeric_argument(ctx, where, n):
                return None
    return calls


def _own_loads(where: ast.AST, name: str) -> list[ast.Name]:
    """The loads of ``name`` in ``where``'s own body (nested functions excluded)."""
    out: list[ast.Name] = []
    todo = list(ast.iter_child_nodes(where))
    while todo:
        n = todo.pop()
        if isinstance(n, FUNCTION_TYPES):
            continue  # (its own walk; a lambda's body is the enclosing function's)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _numeric_argument(ctx: Context, where: ast.AST, n: ast.Name) -> bool:
    """``n`` is an argument of a call of a NumPy-side library (``fmin(loss_wc, x0)``)."""
    for c in walk(where):
        if isinstance(c, ast.Call) and any(a is n for a in (*c.args, *(
                k.value for k in c.keywords))):
            return (ctx.qualified_name(c.func) or "").partition(".")[0] in _NUMERIC_ROOTS
    return False


def reaches_backward(ctx: Context, where: ast.AST, call: ast.Call, hops: int = 0
                     ) -> bool | None:
    """The value of ``call`` (made in the function or module ``where``) flows into what
    ``where`` backpropagates (True), or into what it returns: then ``where``'s own evidence
    decides (:data:`MAX_HOPS` such returns; None: unknown, as a model's ``forward`` returning
    its loss to a trainer out of sight)."""
    if id(call) in fed_calls(ctx, where, backward=True):
        return True
    if not isinstance(where, FUNCTION_TYPES) or id(call) not in fed_calls(ctx, where,
                                                                          backward=False):
        return False
    if where.name == STEP_METHOD:
        return True
    if hops >= MAX_HOPS:
        return None
    return loss_evidence(ctx, where, hops + 1)  # type: ignore[arg-type]


def fed_calls(ctx: Context, where: ast.AST, backward: bool) -> frozenset[int]:
    """``id`` of every call of ``where`` whose value flows into a value it backpropagates
    (``backward``) or returns (not ``backward``): through the names those values are built
    from (every binding of them in the function) and what is appended to them."""
    def make() -> frozenset[int]:
        if backward:
            seeds = [b.loss for b in step_calls(ctx, where).backwards if b.loss is not None]
        else:
            seeds = [n.value for n in walk(where) if isinstance(n, ast.Return)
                     and n.value is not None] if isinstance(where, FUNCTION_TYPES) else []
        return frozenset(_flowing_calls(ctx, where, seeds))
    return ctx.memo("loss-evidence-fed:" + ("b" if backward else "r"), where, make)


def _flowing_calls(ctx: Context, where: ast.AST, seeds: list[ast.expr]) -> set[int]:
    scope = ctx.scope(where)
    out: set[int] = set()
    seen: set[str] = set()
    todo: list[ast.AST] = list(seeds)
    fills: dict[str, list[ast.Call]] | None = None
    while todo:
        for n in walk(todo.pop()):
            if isinstance(n, ast.Call):
                out.add(id(n))
                continue
            name = n.id if isinstance(n, ast.Name) else (
                dotted(n) if isinstance(n, ast.Attribute) else None)
            if not name or name in seen:
                continue
            seen.add(name)
            for b in scope.bindings.get(name, ()):
                v = b.value
                if v is None and isinstance(b.stmt, (ast.Assign, ast.AugAssign, ast.For)):
                    v = b.stmt.value if not isinstance(b.stmt, ast.For) else b.stmt.iter
                if v is not None:
                    todo.append(v)
            if fills is None:
                fills = {}
                for mc in scope.method_calls:
                    if mc.method in _FILLS:
                        fills.setdefault(mc.receiver, []).append(mc.call)
            for c in fills.get(name, ()):
                todo.extend(c.args)
    return out


def graph_fed(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """A positional or keyword argument of ``call`` holds a graph where it is made
    (:func:`graph_value`); not in a LightningModule's ``validation_step`` (Lightning runs it
    with grad off: boltz's lDDT metric ``factored_lddt_loss`` of the predicted coordinates)."""
    if _lightning_eval_step(ctx, where):
        return False
    scope = ctx.scope(where)
    return any(graph_value(ctx, scope, a, call.lineno)
               for a in (*call.args, *(k.value for k in call.keywords)))


def _lightning_eval_step(ctx: Context, where: ast.AST) -> bool:
    """``where`` is a ``validation_step``/``test_step``/``predict_step`` of a class of the
    file deriving from a Lightning class: Lightning's evaluation loops run it under
    ``torch.no_grad()`` / ``torch.inference_mode()``, so nothing made there holds a graph."""
    if not isinstance(where, FUNCTION_TYPES) or where.name not in EVAL_STEP_METHODS:
        return False
    cls = ctx.analysis.class_of(where)
    return cls is not None and any((ctx.qualified_name(b) or "").startswith(
        ("pytorch_lightning.", "lightning.")) for b in cls.node.bases)


def graph_value(ctx: Context, scope: Scope, a: ast.expr, line: int) -> bool:
    """``a`` read at ``line`` holds a model's output (a call of a module object itself or of
    its ``forward``, or a name bound to one, or a slice of either) or a value the flow facts
    call a graph. A method of a module (``self._one_hot_encoder(target)``) is not its output."""
    if scope.kind(a, line) == GRAPH:
        return True
    v: ast.AST | None = a
    while isinstance(v, ast.Subscript):
        v = v.value
    if isinstance(v, ast.Name):
        b = scope.binding_before(v.id, line)
        v = b.value if b is not None else None
        while isinstance(v, ast.Subscript):
            v = v.value
    return isinstance(v, ast.Call) and _runs_module(ctx, scope, v)


def _runs_module(ctx: Context, scope: Scope, c: ast.Call) -> bool:
    f = c.func
    if isinstance(f, ast.Attribute) and f.attr == "forward":
        f = f.value
    k = ctx.analysis.kind(f, scope, c.lineno)
    return k is not None and k.what == MODULE


def passed_graph(ctx: Context, fn: ast.AST, param: str) -> bool:
    """Some call of ``fn`` in the file hands a graph (:func:`graph_value`) for ``param``:
    whatever the parameter's name says (``kl_loss(x, y)`` with ``y`` the student's logits),
    the call sites make it a prediction, not a target."""
    from gradtrace.lint.analysis.grad_values import callers

    def make() -> bool:
        return any(graph_value(ctx, ctx.scope(w), arg, call.lineno)
                   for call, w, arg in callers(ctx, fn, param))
    return ctx.memo("loss-evidence-passed:" + param, fn, make)
