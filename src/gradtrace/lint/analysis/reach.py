"""Which bindings of a name reach a use, and what they hold: one resolution for every tracer.

The three tracers of where a value comes from (GT1 :mod:`.origins`, the GT2 grad-mode sources,
the GT5 graph-carrying bindings) read a function through its :class:`~gradtrace.lint.flow.Scope`
and ask the same three things of it, answered here once:

* which earlier bindings of a name may reach a use (:func:`reaching`: the last one whose block
  encloses the use and every later one, or, without a use, only the last one before a line,
  through the longest bound prefix of an attribute chain when asked: NOTE [binding policy]);
* what value a binding takes (:func:`value_of`: the paired element, else the whole right side
  of an unpacking; nothing for a loop or ``with`` target);
* where grad is off: the ``with`` / decorator ``Scope.no_grad`` records for a statement
  (``Binding.no_grad`` for a binding), and the mode it sets (:func:`off_mode`).

Which function of the file a call runs is answered once here (:func:`called_function`, over
the analysis layer's :meth:`~gradtrace.lint.analysis.facts.Analysis.local_callee` and kinds);
every function of the file by its name is listed once here (:func:`defs_by_name`). What cuts
the graph is the one table in :mod:`.cuts`.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from gradtrace.lint.analysis.kinds import MODULE, OBJECT
from gradtrace.lint.analysis.paths import statement_paths
from gradtrace.lint.grad_modes import FUNCTION_TYPES, grad_mode_of
from gradtrace.lint.analysis.vocabulary import GRAD_OFF_SWITCHES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_statements, statements, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

Def = ast.FunctionDef | ast.AsyncFunctionDef


def value_of(b: Binding) -> ast.expr | None:
    """The expression a binding takes its value from (tuple unpacking: the whole right side;
    a loop or ``with`` target: None)."""
    if b.value is not None:
        return b.value
    s = b.stmt
    if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return s.value
    return None


def reaching(scope: Scope, name: str, line: int, use: ast.stmt | None = None,
             prefix: bool = False) -> list[Binding]:
    """The bindings of ``name`` before ``line`` that may reach the statement ``use``, latest
    first (NOTE [binding policy]); with ``prefix``, when ``name`` has none, those of its
    longest bound prefix (``out.logits`` → ``out``; ``self`` itself is never a binding).

    # NOTE [binding policy]
    One resolution, two readings chosen by ``use``:

    * ``use`` given: the last binding whose block encloses ``use`` and every later one, since
      each may have run last (NOTE [statement order]). The GT1 and GT2 tracers take it: they
      report when *every* source is cut or made under grad-off, so a source that only one
      ``if`` arm binds must be seen, or an alarm fires on a path that keeps the graph.
    * ``use=None``: the last binding in source order, the straight-line reading. The GT5
      dependency walk takes it: its findings claim that a value *holds* a graph (kept across
      iterations, freed by a backward), which every binding that may reach would widen into
      alarms on paths that hold none (``if warmup: x = model(a)`` then ``else: x =
      a.detach()``); its precision was measured with this reading.
    """
    while True:
        if use is None:
            last = scope.binding_before(name, line)
            bs = [last] if last is not None else []
        else:
            bs = statement_paths(scope.ctx, scope.node).reaching(
                scope.bindings_before(name, line), use)
        if bs or not prefix or "." not in name:
            return bs
        name = name.rpartition(".")[0]
        if name == "self":
            return []


def live_binding_before(scope: Scope, name: str, line: int) -> Binding | None:
    """The last binding of ``name`` before ``line`` that can still hold when ``line`` runs:
    a binding in an ``if`` arm that ends in ``return`` (in each of its own arms), wholly
    above ``line``, never falls through to it (TranAD's ``if 'DAGMM' in model.name: l =
    nn.MSELoss(reduction='none')``, both paths returning, then ``l`` of the function's first
    line read by the other models); the straight-line reading of :meth:`Scope.binding_before`
    otherwise."""
    for b in reversed(scope.bindings_before(name, line)):
        if not any(lo <= b.line <= hi < line for lo, hi in _returning_arms(scope)):
            return b
    return None


def _returning_arms(scope: Scope) -> list[tuple[int, int]]:
    """The line spans of the ``if`` arms of ``scope``'s function that always ``return``."""
    def make() -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for s in statements(scope.node):
            if isinstance(s, ast.If):
                for arm in (s.body, s.orelse):
                    if _returns(arm):
                        out.append((arm[0].lineno, arm[-1].end_lineno or arm[-1].lineno))
        return out
    return scope.ctx.memo("returning-arms", scope.node, make)


def _returns(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    return isinstance(last, ast.Return) or isinstance(last, ast.If) and _returns(
        last.body) and _returns(last.orelse)


def off_mode(off: ast.AST, ctx: Context) -> str:
    """``"inference"`` or ``"off"``: what the disabling node ``Scope.no_grad`` recorded (a
    ``with`` statement or a decorator) turns grad into."""
    if isinstance(off, (ast.With, ast.AsyncWith)):
        modes = [grad_mode_of(i.context_expr, ctx.imports) for i in off.items]
        return "inference" if "inference" in modes else "off"
    mode = grad_mode_of(off, ctx.imports)  # type: ignore[arg-type]
    return "inference" if mode == "inference" else "off"


def disables_grad(expr: ast.expr, ctx: Context, maybe: bool = False) -> bool:
    """``no_grad()``, ``inference_mode()``, ``set_grad_enabled(False)`` as a context
    expression or a decorator; with ``maybe``, also one arm of ``torch.no_grad() if freeze
    else nullcontext()`` (grad may be off: enough to stay silent, never to report)."""
    if maybe and isinstance(expr, ast.IfExp):
        return disables_grad(expr.body, ctx) or disables_grad(expr.orelse, ctx)
    return grad_mode_of(expr, ctx.imports) in ("off", "inference")


def switched_off_elsewhere(expr: ast.expr, ctx: Context) -> bool:
    """A context expression calling something of another file (not torch's) with a keyword
    switch that turns grad off (``utils.eval_mode(net, no_grad=True)``, vocabulary
    ``GRAD_OFF_SWITCHES``): grad may be off in the block."""
    if not isinstance(expr, ast.Call) or (ctx.qualified_name(expr.func) or "").startswith(
            "torch."):
        return False
    return any(k.arg in GRAD_OFF_SWITCHES and isinstance(k.value, ast.Constant)
               and k.value.value is GRAD_OFF_SWITCHES[k.arg] for k in expr.keywords)


def in_switched_off(f: Any, stmt: ast.stmt, ctx: Context) -> bool:
    """``stmt`` sits in a ``with`` (a statement of ``f.scope``; ``f.inside`` tells nesting)
    of another file's context manager given a grad-off switch."""
    return any(f.inside(stmt, w) and any(switched_off_elsewhere(i.context_expr, ctx)
                                         for i in getattr(w, "items", ())) for w in f.scope.stmts)


def decorated_off(fn: ast.AST, ctx: Context) -> bool:
    """A function decorated to run with grad off (``@torch.no_grad()``)."""
    return isinstance(fn, FUNCTION_TYPES) and any(disables_grad(d, ctx)
                                                  for d in fn.decorator_list)


def defs_by_name(ctx: Context) -> dict[str, list[Def]]:
    """Every function and method of the file (nested ones too) by its name, in source order;
    built once per file, on first ask."""
    def make() -> dict[str, list[Def]]:
        out: dict[str, list[Def]] = {}
        for s in statements(ctx.tree):
            if isinstance(s, FUNCTION_TYPES):
                out.setdefault(s.name, []).append(s)
        return out
    return ctx.memo("defs-by-name", ctx.tree, make)


def called_function(call: ast.Call, scope: Scope, line: int) -> Def | None:
    """The function of this file that ``call`` (read at ``line`` in ``scope``) runs, or None:
    a helper or ``self.method(...)`` (the analysis layer's ``local_callee``: not when the name
    is rebound first), a static method (``Class.method(...)``), the ``forward`` of a module
    class of the file called through an instance (``model(x)``, ``self.head(h)``; ``Net()``
    constructs one), or a method called through an instance of a class of the file
    (``self.model.refine(h)``, ``env.step(a)``), the instance's kind read by the analysis
    layer (NOTE [kinds]). One answer for GT1's helper cuts, GT5's graph-carrying bindings
    and the registration rules; GT2 follows ``local_callee`` only."""
    memo: dict[tuple[int, int], tuple[ast.Call, Def | None]]
    memo = scope.ctx.memo("called-function", scope.node, dict)
    got = memo.get((id(call), line))  # a long script asks again for each later statement
    if got is None or got[0] is not call:  # (the entry keeps ``call`` alive: ids stay unique)
        got = memo[(id(call), line)] = (call, _called_function(call, scope, line))
    return got[1]


def _called_function(call: ast.Call, scope: Scope, line: int) -> Def | None:
    a = scope.ctx.analysis
    fn = a.local_callee(call, scope, line)
    f = call.func
    if fn is None and isinstance(f, ast.Call) and isinstance(f.func, ast.Name) \
            and (made := a.classes.get(f.func.id)) is not None \
            and _names_class(scope, f.func.id, line):
        return _runs(made)  # `SSIMMetric(data_range)(x, y)`: the new instance runs at once
    if fn is not None or not isinstance(f, (ast.Name, ast.Attribute)):
        return fn
    if isinstance(f, ast.Name) and f.id in a.classes:
        return None  # constructing an instance
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        cls = a.classes.get(f.value.id)
        b = scope.binding_before(f.value.id, line)
        if cls is not None and (b is None or isinstance(b.stmt, ast.ClassDef)):
            m = cls.methods.get(f.attr)
            if m is not None and any(dotted(d) == "staticmethod" for d in m.decorator_list):
                return m
    if isinstance(f, ast.Name) and (inner := _closure_made(f.id, scope, line)) is not None:
        return inner  # NOTE [closure made by a factory]
    k = a.kind(f, scope, line)
    cls = a.classes.get(k.cls or "") if k is not None and k.what == MODULE else None
    if cls is None and isinstance(f, ast.Attribute):  # `self.model.refine(h)`
        own = a.kind(f.value, scope, line)
        cls = a.classes.get(own.cls or "") if own is not None and own.what in (
            MODULE, OBJECT) else None
        return cls.method(f.attr) if cls is not None else None  # NOTE [inherited methods]
    if cls is None and k is not None and k.what == OBJECT:
        cls = a.classes.get(k.cls or "")
    return _runs(cls) if cls is not None else None


def _closure_made(name: str, scope: Scope, line: int) -> Def | None:
    """The nested function that ``name`` holds when its one binding in ``scope`` is the result
    of calling a factory of this file whose every ``return`` gives back a function defined in
    its own body (``d_theta = get_denoiser(self.forward, mask)``, ``get_denoiser`` returning
    its ``x0_from_xt``).

    # NOTE [closure made by a factory]
    Calling such a name runs the closure's body: what it returns is read there (a helper's
    result, NOTE [helper results]), not guessed from the name's spelling (``d_theta`` reads as
    a model's). The factory's arguments are not substituted into the closure: a callable it
    was given (``forward_fn``) is judged as the closure's own free name."""
    bs = scope.bindings.get(name, ())
    if len(bs) != 1 or bs[0].line >= line:
        return None
    s = bs[0].stmt
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)):
        return None
    fac = called_function(s.value, scope, bs[0].line)
    if fac is None and isinstance(s.value.func, ast.Name):  # a factory defined in the function
        fs = scope.bindings.get(s.value.func.id, ())
        fac = fs[0].stmt if len(fs) == 1 and fs[0].line < bs[0].line else None
    if not isinstance(fac, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    inner = {d.name: d for d in fac.body if isinstance(d, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))}
    rets = [r for r in scope_statements(fac) if isinstance(r, ast.Return)]
    names = {r.value.id if isinstance(r.value, ast.Name) else None for r in rets}
    if len(names) != 1 or None in names or (made := inner.get(next(iter(names)))) is None:
        return None
    return made


def _names_class(scope: Scope, name: str, line: int) -> bool:
    b = scope.binding_before(name, line)
    return b is None or isinstance(b.stmt, ast.ClassDef)


def _runs(cls: ClassInfo) -> Def | None:
    """What calling an instance of the file's class ``cls`` runs: a module's ``forward``, a
    plain class's ``__call__``, either inherited from a base class of the file
    (NOTE [inherited methods])."""
    return cls.method("forward") if cls.is_module else cls.method("__call__")


def fed_to_model(f: Any, acc: str, loop: ast.stmt, ctx: Context) -> bool:
    """``acc``, summed over the passes of ``loop`` with grad on, is handed to a model's call
    after the loop (``self.hyper_net(embedding)``): the input of a network whose output is kept,
    so its graph is wanted (PeFLL's client embedding, differentiated later through the
    generated weights), not a metric left holding one."""
    from gradtrace.lint.analysis.model_calls import runs_model
    end = loop.end_lineno or loop.lineno
    for s in f.scope.stmts:
        if s.lineno <= end or not isinstance(s, (ast.Assign, ast.AugAssign, ast.Expr,
                                                   ast.Return)):
            continue
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and any(isinstance(a, ast.Name) and a.id == acc
                                               for a in n.args) \
                    and (callee := dotted(n.func)) and runs_model(ctx, f.scope, callee, s.lineno):
                return True
    return False


def built_from(scope: Scope, exprs: Any, through: Any = None) -> set[str]:
    """The local names the expressions ``exprs`` are built from, through the function's
    assignments (``through(binding)``: the value a binding takes; by default its own
    ``Binding.value``, :func:`value_of` to read a whole assignment's right side too)."""
    todo = [n.id for e in exprs for n in walk(e) if isinstance(n, ast.Name)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for b in scope.bindings.get(name, ()):
            v = b.value if through is None else through(b)
            if v is not None:
                todo.extend(n.id for n in walk(v) if isinstance(n, ast.Name))
    return seen
