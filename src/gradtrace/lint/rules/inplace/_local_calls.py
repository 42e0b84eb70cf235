"""The calls of a local module bound once in a function or script (``gate = nn.Sigmoid()``,
``head = nn.Sequential(..., nn.Softmax(-1))``), followed from the binding: the module is known
by what its constructor builds (NOTE [module results]), so the line calling it (``h =
gate(x)``) need not name any op. Shared by GT602/GT603 (:mod:`.saved_output`)."""
from __future__ import annotations

import ast
from typing import Any, Iterator

from gradtrace.lint.context import Context
from gradtrace.lint.flow import DETACHED, LEAF, NUMBER, NUMPY
from gradtrace.lint.rules.registration._modules import owns_params
from gradtrace.lint.rules.inplace._ops import SAVED_OUT, _LazyModules, local_module_op
from gradtrace.lint.rules.inplace._saved import (
    Producer, _after, _in_training, _other_arm, _rebinds, _rebound_to_itself, _shared,
    _write_target, _written_name,
)

NO_GRAPH = (NUMBER, NUMPY, DETACHED, LEAF)


def local_module_writes(node: ast.Call, ctx: Context, modules_of: Any
                        ) -> list[tuple[Producer, ast.stmt, str, ast.AST, Any]]:
    """(producer, write, kind, target, backward) for ``node``, the constructor in ``name =
    <module>(...)`` (the statement being visited): each ``out = name(x)`` of the same function
    that reads this binding, then an in-place write into ``out`` before ``out`` is rebound and
    a backward (or a training forward) follows. Found once for GT602 and GT603."""
    stmt = ctx.statement
    if not (isinstance(stmt, ast.Assign) and stmt.value is node and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)) or not _builds_module(node, ctx):
        return []
    memo = _shared(ctx)
    key = ("local", id(node))
    got = memo.get(key)  # type: ignore[call-overload]
    if got is None:
        got = memo[key] = list(_writes(node, stmt, ctx, modules_of(ctx)))  # type: ignore[index]
    return got  # type: ignore[no-any-return]


def class_instance_writes(ctx: Context, modules_of: Any
                          ) -> list[tuple[Producer, ast.stmt, str, ast.AST, Any]]:
    """:func:`local_module_writes` for every ``name = Cls(...)`` of the file, in a function or
    the script, with ``Cls`` a module class of the file (``crit = RootLoss()`` whose
    ``forward`` returns ``torch.sqrt(...)``): the constructor's line names no op, so the
    statement gate never visits it; found once per file, shared by GT602 and GT603."""
    def make() -> list[tuple[Producer, ast.stmt, str, ast.AST, Any]]:
        from gradtrace.lint.analysis.calls import (
            _every_statement, ascii_code, statements_on, word_lines,
        )
        from gradtrace.lint.grad_modes import FUNCTION_TYPES
        names = [c for c, info in ctx.analysis.classes.items() if info.is_module]
        if not names:
            return []
        # NOTE [instance bindings]: one search for the lines of every module class, not a
        # call_sites walk per class (transformers: ~9,500 walks); the shape `name = Cls(...)`
        # is the statement's own value, so the statement is read, not walked.
        wanted = set(names)
        bound: dict[str, list[tuple[ast.Call, ast.Assign, tuple[ast.AST, ...]]]] = {}
        found = statements_on(ctx, _outside_methods(ctx, word_lines(ctx, names))) \
            if ascii_code(ctx) else _every_statement(ctx)
        for stmt, outer in found:
            if stmt.__class__ is ast.Assign:
                call = stmt.value  # type: ignore[attr-defined]
                if call.__class__ is ast.Call and call.func.__class__ is ast.Name \
                        and call.func.id in wanted and len(stmt.targets) == 1 \
                        and stmt.targets[0].__class__ is ast.Name:  # type: ignore[attr-defined]
                    bound.setdefault(call.func.id, []).append((call, stmt, outer))
        out: list[tuple[Producer, ast.stmt, str, ast.AST, Any]] = []
        for cname in names:  # the classes' order, each class's bindings in source pre-order
            for call, stmt, outer in bound.get(cname, ()):
                fn = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)),
                          ctx.tree)
                if ctx.analysis.class_of(fn) is not None:
                    continue  # a method: a module's own parts are `self.x` (class_writes)
                memo = _shared(ctx)
                key = ("local", id(call))
                got = memo.get(key)  # type: ignore[call-overload]
                if got is None:
                    got = memo[key] = list(_writes(  # type: ignore[index]
                        call, stmt, ctx, modules_of(ctx), fn))
                out.extend(got)
        return out
    return ctx.memo("class-instance-writes", ctx.tree, make)


def _outside_methods(ctx: Context, lines: list[int]) -> list[int]:
    """``lines`` less those inside the body of a method (``class_of`` knows it) whose lines
    hold no ``def`` after its own: every statement there has that method as its innermost
    function, so no binding of :func:`class_instance_writes` lies there
    (NOTE [instance bindings]); a method holding a nested function keeps its lines."""
    from bisect import bisect_left, bisect_right

    from gradtrace.lint.analysis.calls import word_lines
    if not lines:
        return lines
    defs = word_lines(ctx, ("def",))
    ranges = []
    for info in ctx.analysis.classes.values():
        for m in info.methods.values():
            if ctx.analysis.class_of(m) is None:
                continue
            lo, hi = m.lineno, m.end_lineno or m.lineno
            k = bisect_right(defs, lo)
            if k < len(defs) and defs[k] <= hi:
                continue  # a nested function: its statements are no method's
            ranges.append((lo, hi))
    if not ranges:
        return lines
    ranges.sort()
    los = [lo for lo, _ in ranges]
    out = []
    for line in lines:  # the pruned ranges hold no other method: they are disjoint
        k = bisect_left(los, line) - 1
        if k < 0 or line > ranges[k][1]:
            out.append(line)
    return out


def _writes(node: ast.Call, stmt: ast.Assign, ctx: Context, modules: _LazyModules,
            fn: ast.AST | None = None) -> Iterator[tuple[Producer, ast.stmt, str, ast.AST, Any]]:
    name = stmt.targets[0].id  # type: ignore[attr-defined]
    fn = fn or ctx.function or ctx.tree
    scope = ctx.scope(fn)
    uses = [n for n in scope.loads.get(name, ()) if n.lineno > stmt.lineno]
    if not uses:
        return
    calls = _own_calls(uses, scope)
    if not calls:
        return
    op = local_module_op(node, ctx, scope)
    if op is None:
        return
    memo = _shared(ctx)
    trained = None
    for call, use in calls:
        b = scope.binding_before(name, use.lineno)
        if b is None or b.stmt is not stmt or scope.grad_off_at(call) is not None:
            continue
        if call.args and scope.kind(call.args[0], use.lineno) in NO_GRAPH:
            trained = _optimized(name, node, ctx) if trained is None else trained
            if not trained:  # NOTE [trained local module]
                continue
        out = use.targets[0].id  # type: ignore[attr-defined]
        prod = Producer(call, op.rstrip("_"), SAVED_OUT.get(op, "relu"))
        for s in _after(fn, use, memo):
            if _written_name(s, True) == out and not _other_arm(scope, use, s, out):
                w = _write_target(s, ctx, modules, scope)
                if w is not None and w[0] == out:
                    training = _in_training(ctx, fn, s)
                    if training:
                        yield prod, s, w[1], w[2], training
            if _rebinds(s, out) and not _rebound_to_itself(s, out):
                break


def _own_calls(uses: list[ast.Name], scope: Any) -> list[tuple[ast.Call, ast.stmt]]:
    """(call, statement) for each use that is ``out = name(...)``."""
    got = []
    for n in uses:
        s = scope.statement_of(n)
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call) \
                and s.value.func is n:
            got.append((s.value, s))
    return got


def _builds_module(call: ast.Call, ctx: Context) -> bool:
    """``call`` constructs a module: a torch.nn class or a module class of the file."""
    q = ctx.qualified_name(call.func) or ""
    if q.startswith("torch.nn.") and q.rpartition(".")[2][:1].isupper():
        return True
    info = ctx.analysis.classes.get(call.func.id) if isinstance(call.func, ast.Name) else None
    return info is not None and info.is_module


# NOTE [trained local module]
# A local module called on an input with no graph (`trunk(torch.randn(...))`) still gives an
# output with one when its own layers train: `trunk = nn.Sequential(nn.Linear(8, 16),
# nn.ReLU())` handed to an optimizer (`SGD(trunk.parameters())`) saves the ReLU's output for
# the Linear's weight gradient. Only a constructor that owns parameters, in a file that
# freezes nothing, with an optimizer of the file built over `name.parameters()`.
def _optimized(name: str, node: ast.Call, ctx: Context) -> bool:
    if not owns_params(node, ctx):
        return False
    found = False
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "requires_grad_" and n.args \
                and isinstance(n.args[0], ast.Constant) and n.args[0].value is False:
            return False  # the file freezes something
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
                and n.value.value is False and any(isinstance(t, ast.Attribute)
                                                   and t.attr == "requires_grad" for t in n.targets):
            return False
        if not found and isinstance(n, ast.Call) and (
                ctx.qualified_name(n.func) or "").startswith("torch.optim.") and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == "parameters" and isinstance(c.func.value, ast.Name)
                and c.func.value.id == name for c in ast.walk(n)):
            found = True
    return found
