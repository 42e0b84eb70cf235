"""Which ops are singular where, spelled as the code spells them (shared by GT751-GT754).

A *singular* op has an infinite or undefined derivative somewhere in the domain the code
feeds it: ``sqrt``/``rsqrt``/``pow(x, 0.5)`` at 0 (and NaN below), ``log*`` at 0, ``1/x`` and
``a / x`` at 0, ``acos``/``asin`` at +-1, ``exp``/``expm1``/``sinh``/``cosh`` where they overflow
(x > 88 in float32). Autograd multiplies that derivative by the incoming gradient even when the
incoming gradient is 0, and ``0 * inf`` is NaN (checked on torch 2.13).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

# op -> what is singular about it (used in messages)
SINGULAR = {
    "sqrt": "an infinite derivative at 0 (NaN below)",
    "rsqrt": "an infinite derivative at 0",
    "log": "an infinite derivative at 0", "log2": "an infinite derivative at 0",
    "log10": "an infinite derivative at 0", "reciprocal": "an infinite derivative at 0",
    "log1p": "an infinite derivative at -1",
    "acos": "an infinite derivative at +-1", "arccos": "an infinite derivative at +-1",
    "asin": "an infinite derivative at +-1", "arcsin": "an infinite derivative at +-1",
    "atanh": "an infinite derivative at +-1", "arctanh": "an infinite derivative at +-1",
    "acosh": "an infinite derivative at 1 (NaN below)",
    "arccosh": "an infinite derivative at 1 (NaN below)",
    "logit": "an infinite derivative at 0 and 1",
    "exp": "an overflowing value and derivative for large inputs",
    "expm1": "an overflowing value and derivative for large inputs",
    "exp2": "an overflowing value and derivative for large inputs",
    "sinh": "an overflowing value and derivative for large inputs",
    "cosh": "an overflowing value and derivative for large inputs",
}
DIV = "a division by it (infinite derivative at 0)"
ROOT = "a fractional power (infinite derivative at 0)"
TORCH_PREFIXES = ("torch.", "torch.special.")
VIEWS = frozenset({"view", "reshape", "squeeze", "unsqueeze", "flatten", "float", "double",
                   "contiguous", "clone"})


def torch_op(call: ast.Call, ctx: Context) -> tuple[str, ast.expr] | None:
    """(op, operand) when ``call`` is ``torch.<op>(x, ...)`` or ``x.<op>(...)`` of a tensor
    (not ``np.sqrt``, ``math.log``, ``self.log(...)``, ``module.fn(...)``)."""
    f = call.func
    q = ctx.qualified_name(f) or ""
    if q.startswith(TORCH_PREFIXES):
        return (q.rpartition(".")[2], call.args[0]) if call.args else None
    if not isinstance(f, ast.Attribute) or q.startswith(("numpy.", "math.", "np.")):
        return None
    recv = f.value
    if isinstance(recv, ast.Name) and (recv.id in ("self", "cls")
                                       or ctx.imports.is_imported(recv.id)):
        return None
    if f.attr in SINGULAR and (call.args or call.keywords):
        return None  # Tensor.sqrt()/log()/exp() take no arguments: another object's method
    return f.attr, recv


def _fractional(e: ast.AST) -> bool:
    """A constant exponent below 1 that is not a whole number (0.5, 1/3, -1, -0.5)."""
    v = e.value if isinstance(e, ast.Constant) else None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) \
            and isinstance(e.operand, ast.Constant):
        v = -e.operand.value if isinstance(e.operand.value, (int, float)) else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and all(
            isinstance(s, ast.Constant) and isinstance(s.value, (int, float))
            for s in (e.left, e.right)) and e.right.value:  # type: ignore[attr-defined]
        v = e.left.value / e.right.value  # type: ignore[attr-defined]
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v < 1 \
        and (v != int(v) or v < 0)


def singular_uses(e: ast.AST, ctx: Context) -> Iterator[tuple[ast.AST, str, ast.expr, str]]:
    """(node, op, operand, why) for every singular op applied inside expression ``e``."""
    for n in walk(e):
        if isinstance(n, ast.Call):
            got = torch_op(n, ctx)
            if got is None:
                continue
            op, arg = got
            if op in SINGULAR:
                yield n, op, arg, SINGULAR[op]
            elif op in ("pow", "float_power") and len(n.args) >= (2 if arg is n.args[0] else 1) \
                    and _fractional(n.args[-1]):
                yield n, op, arg, ROOT
            elif op in ("div", "true_divide", "divide") and n.args:
                yield n, op, n.args[-1], DIV
        elif isinstance(n, ast.BinOp):
            if isinstance(n.op, ast.Div):
                yield n, "/", n.right, DIV
            elif isinstance(n.op, ast.Pow) and _fractional(n.right):
                yield n, "**", n.left, ROOT


def strip(e: ast.AST) -> ast.AST:
    """``x.float().view(-1)`` -> ``x``: the tensor under casts and views."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in VIEWS:
        e = e.func.value
    return e


def spelled(e: ast.AST) -> str:
    """A spelling of an expression for comparing two of them (``ast.dump`` of the stripped
    expression: names, attributes and subscripts compare by structure)."""
    return ast.dump(strip(e))


CHECKS = frozenset({"isfinite", "isnan", "isinf", "signbit", "isposinf", "isneginf", "gt",
                    "ge", "lt", "le", "eq", "ne", "greater", "less", "greater_equal",
                    "less_equal", "not_equal"})


def compared(test: ast.AST, ctx: Context) -> set[str]:
    """Spellings of the values a mask or condition tests: both sides of each comparison,
    the operands of ``isfinite``/``isnan``/``gt``..., also under ``abs``."""
    out: set[str] = set()
    for n in walk(test):
        sides: list[ast.AST] = []
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
        elif isinstance(n, ast.Call):
            got = torch_op(n, ctx)
            if got and got[0] in CHECKS:
                sides = [got[1], *n.args[1:]] if got[1] is not (n.args or [None])[0] \
                    else list(n.args)
        for side in sides:
            out.add(spelled(side))
            inner = torch_op(side, ctx) if isinstance(side, ast.Call) else None
            if inner and inner[0] in ("abs", "detach"):
                out.add(spelled(inner[1]))
    return out


def resolve(e: ast.AST, ctx: Context, line: int) -> ast.AST:
    """A bare name bound once in the same function: its value (one step), else ``e``; not
    when the value is written in place between the binding and ``line`` (``std[std == 0] =
    1.0``, ``std.clamp_(min=eps)``: the guard is the write, NOTE [written after binding])."""
    name = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
    if name is None:
        return e
    b = ctx.scope().binding_before(name, line)
    if b is not None and b.value is not None and isinstance(b.stmt, ast.Assign) \
            and len(b.stmt.targets) == 1 and not _written(ctx, name, b.line, line):
        return b.value
    return e


# NOTE [written after binding]
# `std = data.std(dim=0)`, `std[std == 0] = 1.0`, then `(data - avg) / std`: the value divided
# by is no longer the bare deviation its binding computed (a motion-prediction trainer's
# normalisation of constant channels). A name whose elements are assigned, or which an
# in-place method (`clamp_`, `add_`, `masked_fill_`) changes, between its binding and the
# line asked about is not resolved to the binding's value.
def _written(ctx: Context, name: str, start: int, end: int) -> bool:
    node = ctx.scope().node
    writes = ctx.memo("gt7-inplace-writes", node, lambda: _writes(node))
    return any(start < at < end for at in writes.get(name, ()))


_WRITE_TYPES = (ast.Assign, ast.AugAssign, ast.Call)


def _writes(node: ast.AST) -> dict[str, list[int]]:
    """Lines where each name is written in place (element assignment, in-place method)."""
    out: dict[str, list[int]] = {}
    for n in of_types(node, _WRITE_TYPES):  # the walk's nodes of those types, in its order
        names: list[str | None] = []
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names = [dotted(t.value) for t in targets if isinstance(t, ast.Subscript)]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr.endswith("_") and not n.func.attr.endswith("__"):
            names = [dotted(n.func.value)]
        for name in names:
            if name:
                out.setdefault(name, []).append(n.lineno)
    return out


def has_positive_shift(e: ast.AST, ctx: Context) -> bool:
    """Whether ``e`` keeps itself off 0: ``+ eps``, ``clamp(min=...)``, ``clamp_min``,
    ``maximum``, ``where``, ``masked_fill``, ``nan_to_num``, ``abs() + c``... anywhere in it."""
    for n in walk(e):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            return True
        if isinstance(n, ast.Call):
            got = torch_op(n, ctx)
            name = got[0] if got else (ctx.qualified_name(n.func) or "").rpartition(".")[2]
            if name in ("clamp", "clip", "clamp_min", "clamp_", "clamp_min_", "maximum",
                        "max", "where", "masked_fill", "nan_to_num", "add", "softplus",
                        "relu", "fmax"):
                return True
    return False


def _backward_after(scope_node: ast.AST, line: int, ctx: Context) -> bool:
    from gradtrace.lint.analysis.steps import step_calls
    last = ctx.memo("gt7-last-loss-line", scope_node, lambda: max(
        (s.call.lineno for s in step_calls(ctx, scope_node).losses()), default=-1))
    return last >= line  # (the last backward's line, once per scope: a module's are many)


def _enclosing_function(ctx: Context, node: ast.AST,
                        chain: tuple[ast.AST, ...]) -> ast.AST:
    """The innermost def holding ``node``'s line (the module when there is none), among the
    statements ``chain`` around it (the line of a call in a decorator is not the def's)."""
    best: ast.AST = ctx.tree
    for fn in chain:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and fn.lineno <= node.lineno <= (fn.end_lineno or 0) \
                and fn.lineno >= getattr(best, "lineno", 0):  # type: ignore[attr-defined]
            best = fn
    return best


def _callers(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef
             ) -> Iterator[tuple[ast.Call, ast.AST]]:
    """(call, the def around it) for the calls ``name(...)`` / ``self.name(...)`` of ``fn``'s
    name anywhere in the file (NOTE [call sites]), and for a method, ``obj.name(...)`` on an
    instance of its class (NOTE [method called on an instance])."""
    cls = None
    for call, s, outer in call_sites(ctx, fn.name):
        f = call.func
        if isinstance(f, ast.Name) or isinstance(f.value, ast.Name) \
                and f.value.id == "self":  # type: ignore[attr-defined]
            yield call, _enclosing_function(ctx, call, (*outer, s))
            continue
        if cls is None:
            cls = ctx.analysis.class_of(fn) or False
        if cls and _made_here(ctx, cls.node.name):
            where = _enclosing_function(ctx, call, (*outer, s))
            if cls.methods.get(f.attr) is fn and _built_for_the_call(  # type: ignore[attr-defined]
                    ctx, f.value, cls.node.name, where, call.lineno):
                yield call, where


def _built_for_the_call(ctx: Context, recv: ast.AST, cls: str, where: ast.AST,
                        line: int) -> bool:
    """The receiver is made in the calling function by the class's constructor
    (``Ring(mu, k).rsample()``, or ``q = Ring(mu, k)`` bound there): its state is the values of
    that function. An instance kept on ``self`` (a detector built in ``__init__``) is a tool
    whose inputs are the call's arguments, whose graphs are not known here."""
    if isinstance(recv, ast.Name):
        b = ctx.scope(where).binding_before(recv.id, line)
        recv = b.value if b is not None and isinstance(b.stmt, ast.Assign) else None
    return isinstance(recv, ast.Call) and (dotted(recv.func) or "").rpartition(".")[2] == cls


def _made_here(ctx: Context, cls: str) -> bool:
    """# NOTE [method called on an instance]
    ``q = VonMisesFisher(mu, kappa)`` then ``z = q.rsample()`` in a ``forward``: the method
    runs where its instance calls it, so what makes a caller of a function differentiated
    (a ``forward``, a loss, a ``backward()`` after the call) makes the method differentiated
    too. Asked only when the file constructs the class somewhere (else no receiver can hold
    one), and followed only for an instance made in the calling function by the class's own
    constructor (so the method that runs is the class's) (:func:`_built_for_the_call`:
    kornia's SOLD2 ``self.line_detector.detect(junctions, heatmap)`` gets integer junctions
    from its caller, and a tool kept on ``self`` says nothing of its inputs' graphs)."""
    return bool(call_sites(ctx, cls))


def carries_graph(ctx: Context, operand: ast.expr, node: ast.AST,
                  numeric: bool = False) -> bool:
    """Whether ``operand`` (read at ``node``) may carry a graph, by the shared tracer: a value
    built only from factories, constants and data (``torch.arange(n).type_as(x)``: the cast
    keeps nothing of ``x``), or cut on the way, gets no gradient, so its op's derivative is
    never evaluated; nor does a value in a method of a ``torch.utils.data.Dataset`` subclass,
    nor one in the ``backward`` of a ``torch.autograd.Function`` (grad is off there), nor
    one in a function every call of which runs with grad off
    (NOTE [grad off by the callers]). ``numeric``: a value whose graph reaches only leaves
    whose gradient nothing reads carries none (NOTE [unread leaves]): an inf/NaN derivative
    there changes no parameter."""
    from gradtrace.lint.analysis.caller_grad import callers_grad_off
    from gradtrace.lint.analysis.origins import origins
    from gradtrace.lint.analysis.torch_classes import autograd_backward, dataset_method
    fn = ctx.function or ctx.tree
    if dataset_method(ctx, fn):
        return False  # a Dataset prepares data, which no backward reaches
    if autograd_backward(ctx, fn):
        return False  # a custom Function's backward runs with grad off
    if ctx.function is not None and callers_grad_off(ctx, ctx.function):
        return False  # NOTE [grad off by the callers]: an sRGB curve applied at test time
    line = getattr(node, "lineno", 0)
    if not origins(ctx, fn).trace(operand, ctx.statement, line).live:
        return False
    if numeric:
        from gradtrace.lint.analysis.unread_leaves import trace_without_unread_leaves
        t = trace_without_unread_leaves(ctx, fn, operand, line)
        return t is None or t.live
    return True


def in_training(ctx: Context, node: ast.AST, forward: bool = True,
                through_forward: bool = True) -> bool:
    """Whether a gradient can flow through ``node``: grad is on there and it runs before a
    ``backward()`` in its function or module body, in a module's ``forward`` (unless
    ``forward=False``), in a loss (a function or class named like one), or in a helper called
    (one level up; two when the outer caller runs ``backward()`` itself) from code that then
    runs ``backward()``. ``through_forward=False``: a helper called from a ``forward`` does
    not count (it may only compute statistics of the input, which carry no gradient). Never
    in a method of a ``torch.utils.data.Dataset`` subclass (it prepares data)."""
    from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE
    from gradtrace.lint.analysis.grad_sources import is_inference_function
    from gradtrace.lint.analysis.torch_classes import dataset_method
    from gradtrace.lint.analysis.cut_reads import read_only_cut
    if ctx.grad_disabled is not None:
        return False
    fn = ctx.function
    stmt = ctx.statement
    if fn is None:  # a script: its statements read as one function's (NOTE [read only cut])
        return stmt is not None and _backward_after(ctx.tree, stmt.lineno, ctx) \
            and not read_only_cut(ctx, ctx.tree, stmt)
    if is_inference_function(fn, ctx) or dataset_method(ctx, fn) \
            or stmt is not None and read_only_cut(ctx, fn, stmt):
        return False  # NOTE [read only cut]
    cls = ctx.class_def
    if cls is not None and any((ctx.qualified_name(b) or "").endswith("Function")
                               for b in cls.bases):
        return False  # an autograd.Function's forward/backward run without recording
    if LOSS_NAME_RE.search(fn.name) or cls is not None and LOSS_NAME_RE.search(cls.name):
        from gradtrace.lint.analysis.loss_evidence import loss_evidence
        if fn.name != "forward" and loss_evidence(ctx, fn) is False:
            return False  # NOTE [loss evidence]: named like a loss, never backpropagated
        return _result_reaches_grad(ctx, fn)
    if fn.name == "forward" and cls is not None:
        return forward or _loss_module_trains(ctx, cls)
    if stmt is not None and _backward_after(fn, stmt.lineno, ctx):
        return True
    return _caller_trains(ctx, fn, 2, through_forward=through_forward)


def never_differentiated(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` is a function that runs no ``backward()`` nor ``autograd.grad``, is no
    ``forward``, no loss (a function or class named like one, a Lightning step) and no caller
    in the file trains what it returns: what it computes is used as a value (a zero-order
    estimate of a gradient, smoothing-adversarial's attack), never differentiated."""
    from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "forward":
        return False
    cls = ctx.analysis.class_of(fn)
    if LOSS_NAME_RE.search(fn.name) or cls is not None and LOSS_NAME_RE.search(cls.name) \
            or _in_loss(ctx, fn) or _backward_after(fn, 0, ctx) or any(
                isinstance(n, ast.Attribute) and n.attr == "grad"
                and dotted(n.value) in ("autograd", "torch.autograd") for n in walk(fn)):
        return False
    return not _caller_trains(ctx, fn, 2)


def _caller_trains(ctx: Context, fn: ast.AST, depth: int, direct: bool = True,
                   through_forward: bool = True) -> bool:
    """A call of ``fn`` sits in a ``forward``, a loss, or before a ``backward()`` of its
    function; through one more same-file helper only before a ``backward()`` (a helper of a
    helper of ``forward`` mostly prepares conditioning data, which carries no gradient)."""
    from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE
    from gradtrace.lint.analysis.metric_reads import unread_result
    for call, outer in _callers(ctx, fn):  # type: ignore[arg-type]
        if outer is fn or _records_nothing(ctx, outer) or unread_result(ctx, outer, call):
            continue  # (the last: logged, or NOTE [read only as numbers])
        if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                direct and outer.name == "forward" and through_forward
                and not _layer_free_untrained(ctx, outer)  # NOTE [layer-free forward]
                or direct and LOSS_NAME_RE.search(outer.name) or _in_loss(ctx, outer)):
            return True
        if _backward_after(outer, call.lineno, ctx):
            return True
        if depth > 1 and isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and _caller_trains(ctx, outer, depth - 1, direct=False):
            return True
    return False


def _layer_free_untrained(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    # NOTE [layer-free forward]
    """``fn`` is the ``forward`` of a module class that holds no
    layer and no tensor, is not named like a loss, is made in this file, and no instance of
    which is called before a ``backward()`` here (a reward model only scripted and saved): its
    uses are in sight and none trains it, so whether its input carries a graph is not known."""
    from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE
    info = ctx.analysis.class_of(fn)
    if info is None or not info.is_module or LOSS_NAME_RE.search(info.node.name) or any(
            not isinstance(a.value, (ast.Constant, ast.Name)) for a in info.attrs.values()):
        return False
    if not any(True for _ in call_sites(ctx, info.node.name)):
        return False  # made nowhere here: a public module (kornia's AEPE) for callers out of sight
    return not _loss_module_trains(ctx, info.node)


def _in_loss(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``fn`` is a method of a class named like a loss (a triplet loss's distance method) or
    a Lightning ``training_step`` (whose returned loss Lightning backpropagates): what it
    computes, and what the helpers it calls compute, is differentiated."""
    from gradtrace.lint.analysis.vocabulary import LOSS_NAME_RE, STEP_METHOD
    if fn.name == STEP_METHOD:
        return True
    info = ctx.analysis.class_of(fn)
    return info is not None and bool(LOSS_NAME_RE.search(info.node.name))


def _loss_module_trains(ctx: Context, cls: ast.ClassDef) -> bool:
    """``cls`` holds no layer and no tensor (its ``self`` attributes are numbers and names:
    a loss written as a module, Zero-DCE's ``L_color``) and an instance of it is called before
    a ``backward()`` of the caller: its forward is part of the loss."""
    info = ctx.analysis.classes.get(cls.name)
    if info is None or not info.is_module or any(
            not isinstance(a.value, (ast.Constant, ast.Name)) for a in info.attrs.values()):
        return False
    for ctor, s, outer in call_sites(ctx, cls.name):
        if not (isinstance(s, ast.Assign) and s.value is ctor and len(s.targets) == 1):
            continue
        name = (dotted(s.targets[0]) or "").rpartition(".")[2]
        if not name:
            continue
        for call, s2, outer2 in call_sites(ctx, name):
            if _backward_after(_enclosing_function(ctx, call, (*outer2, s2)), call.lineno, ctx):
                return True
    return False


def _records_nothing(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` is a method of an ``autograd.Function`` (its forward runs without recording)."""
    info = ctx.analysis.class_of(fn)
    return info is not None and any((ctx.qualified_name(b) or "").endswith("Function")
                                    for b in info.node.bases)


def _result_reaches_grad(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """False when the statement's value is returned by ``fn`` and every caller in the file
    uses the result only under ``no_grad`` (an angle kept for statistics)."""
    stmt = ctx.statement
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 \
            or not isinstance(stmt.targets[0], ast.Name):
        return True
    name = stmt.targets[0].id
    if not any(isinstance(r, ast.Return) and isinstance(r.value, ast.Name)
               and r.value.id == name for r in walk(fn)):
        return True
    calls = list(_callers(ctx, fn))
    if not calls:
        return True
    for call, outer in calls:
        scope = ctx.scope(outer)
        s = scope.statement_of(call)
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and s.value is call):
            return True
        uses = scope.uses_after(s.targets[0].id, s.lineno)
        if not uses or any(scope.grad_off_at(u) is None for u in uses):
            return True
    return False


def input_feature(ctx: Context) -> bool:
    """The current function is a method of a model (not a loss) that calls no layer and is
    called only from its class's ``forward``, with that ``forward``'s own arguments as they
    came in (``self.get_grid(data.pos[None])`` on the first lines, before anything rebinds
    them): it turns the raw input into features (Transolver's distances from the mesh points to
    a fixed grid), a statistic of the data that no weight reaches."""
    fn, cls = ctx.function, ctx.class_def
    if fn is None or cls is None or fn.name == "forward" or _in_loss(ctx, fn) or any(
            isinstance(n, ast.Call) and (dotted(n.func) or "").startswith("self.")
            for n in walk(fn)):
        return False
    calls = list(_callers(ctx, fn))
    for call, outer in calls:
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or outer.name != "forward" or ctx.analysis.class_of(outer) is None \
                or ctx.analysis.class_of(outer).node is not cls:  # type: ignore[union-attr]
            return False
        scope = ctx.scope(outer)
        names = [n.id for a in call.args for n in walk(a) if isinstance(n, ast.Name)]
        if not names or not all(_raw_input(scope, outer, n, call.lineno, 0) for n in names):
            return False
    return bool(calls)


def _raw_input(scope: Scope, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
               line: int, depth: int) -> bool:
    """``name`` at ``line`` holds an argument of ``fn`` or a part of one (``a, b = data``,
    ``pos = data.pos``), no call between."""
    b = scope.binding_before(name, line)
    if b is None:
        return name in {a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs}
    v = getattr(b.stmt, "value", None) if isinstance(b.stmt, ast.Assign) else None
    if v is None or depth > 3 or any(isinstance(n, ast.Call) for n in walk(v)):
        return False
    return all(_raw_input(scope, fn, n.id, b.line, depth + 1)
               for n in walk(v) if isinstance(n, ast.Name))
