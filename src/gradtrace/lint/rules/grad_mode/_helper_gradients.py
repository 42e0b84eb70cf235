"""GT210's helpers: where a function of the file takes a gradient of its own, or of what it is
given, and the `if` arms (guards) that switch it off."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context, grad_mode_of
from gradtrace.lint.grad_modes import chooses_mode
from gradtrace.lint.rules._gates import file_says_word
from gradtrace.lint.rules.grad_mode.reenable import GRADIENT_CALLS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.analysis.grad_off_calls import computed

Guard = tuple[ast.expr, bool]  # an `if` test and the arm (True: body) a statement is in


def _differentiates(ctx: Context) -> bool:
    """Whether the file may take a gradient (NOTE [word gates]): `x.backward()` and each of
    :data:`GRADIENT_CALLS` end in a name written in this file's code as a whole word (the
    attribute called, or the name its import brings in), and every helper followed is a
    function of this file (``resolve``); without one, :func:`_own_gradient` finds none."""
    return file_says_word(ctx, *_GRADIENT_WORDS)


_GRADIENT_WORDS = tuple(sorted({"backward", *(q.rpartition(".")[2] for q in GRADIENT_CALLS)}))


def _own_gradient(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                  call: ast.Call | None = None, strict: bool = False) -> ast.Call | None:
    """A gradient call of ``fn`` (not under a grad-mode context or decorator of its own) on
    an output ``fn`` computes itself from a call (``out = model(x)``), and that ``call`` (the
    call of ``fn`` under no_grad) does not switch off with a constant argument
    (``run_epoch(train=False)`` and ``if train: loss.backward()``). ``strict``: only a
    gradient call under no ``if`` at all (a flag passed down, a mode kept on ``self``)."""
    def make() -> list[tuple[ast.Call, tuple[Guard, ...]]]:
        if any(grad_mode_of(d, ctx.imports) for d in fn.decorator_list):
            return []
        local: set[str] = set()
        arith: set[str] = set()  # `cost = (a - b).pow(2).sum() + c`: computed here too
        todo: list[tuple[ast.stmt, tuple[Guard, ...]]] = [(s, ()) for s in fn.body]
        calls: list[tuple[ast.Call, tuple[Guard, ...]]] = []
        while todo:
            s, guards = todo.pop(0)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)) and any(
                    chooses_mode(i.context_expr, ctx.imports) for i in s.items):
                continue  # the helper chose its own grad mode there (a flag's too)
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
                local.update(t.id for t in s.targets if isinstance(t, ast.Name))
            elif isinstance(s, ast.Assign) and isinstance(s.value, (ast.BinOp, ast.UnaryOp)):
                arith.update(t.id for t in s.targets if isinstance(t, ast.Name))
            for n in bfs_walk(s) if not hasattr(s, "body") else ():
                if isinstance(n, ast.Call):
                    calls.append((n, guards))
            if isinstance(s, ast.If):
                todo.extend((b, (*guards, (s.test, True))) for b in s.body)
                todo.extend((b, (*guards, (s.test, False))) for b in s.orelse)
                continue
            for field in ("body", "orelse", "finalbody"):
                todo.extend((b, guards) for b in getattr(s, field, ()) or ())
        out = []
        for c, guards in calls:
            q = ctx.qualified_name(c.func) or ""
            target = c.args[0] if q in GRADIENT_CALLS and c.args else next(
                (k.value for k in c.keywords if k.arg == "outputs"), None) \
                if q in GRADIENT_CALLS else (
                c.func.value if isinstance(c.func, ast.Attribute) and c.func.attr == "backward"
                else None)
            root, torch_op = target, False
            while isinstance(root, (ast.Call, ast.Attribute, ast.Subscript)):
                if isinstance(root, ast.Call):
                    # `F.cross_entropy(model(x), y).backward()`: computed in the statement
                    torch_op = torch_op or (ctx.qualified_name(root.func) or "").startswith(
                        "torch.") and bool(root.args)
                root = root.func if isinstance(root, ast.Call) else root.value
            if torch_op or isinstance(root, ast.Name) and root.id in local:
                out.append((c, guards, "call"))
            elif isinstance(root, ast.Name) and root.id in arith:
                out.append((c, guards, "arith"))
            elif isinstance(root, ast.Name) and root.id in params and root.id != "self":
                out.append((c, guards, root.id))  # a value the caller hands in
        return out
    params = {p.arg for p in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    got = ctx.memo("gt210-own-gradients", fn, make)
    if strict:  # unguarded: a test of a flag or a mode on `self` may be what switches it off
        return next((c for c, guards, how in got if how in ("call", "arith") and not guards),
                    None)
    return next((c for c, guards, how in got
                 if how == "call" and (call is None or not any(
                     _switched_off(g, fn, call) for g in guards))), None)


def _given_gradient(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                    binds: dict[str, ast.expr], made: set[str], where: ast.AST
                    ) -> ast.Call | None:
    """A gradient call of ``fn`` (under no test of a parameter) on a parameter that the call
    (``binds``: parameter -> argument) gives a value computed in the grad-off block
    (``made``): ``with torch.no_grad(): out = model(x); cam(out)`` and ``cam`` runs
    ``scores.sum().backward()`` on it."""
    if not made:
        return None
    _own_gradient(ctx, fn)
    params = {p.arg for p in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for c, guards, how in ctx.memo("gt210-own-gradients", fn, lambda: []):
        arg = binds.get(how)
        if arg is not None and computed(arg, made, where, ctx) and not any(
                isinstance(x, ast.Name) and x.id in params
                for test, _ in guards for x in ast.walk(test)):
            return c
    return None


def _switched_off(guard: Guard, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                  call: ast.Call) -> bool:
    """The arm of ``guard`` never runs for ``call``: the test is a parameter of ``fn`` (or
    its negation) and ``call`` passes it a constant (or leaves it to a constant default)
    that picks the other arm."""
    test, arm = guard
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, arm = test.operand, not arm
    if arm and (isinstance(test, ast.Attribute) and test.attr == "requires_grad" or isinstance(
            test, ast.Call) and (dotted(test.func) or "").endswith("is_grad_enabled")):
        return True  # `if loss.requires_grad: loss.backward()`: grad is off at ``call``
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if arm else ast.Or):
        # `if is_train and optimizer is not None:` never runs when one part is known false
        return any(_switched_off((v, arm), fn, call) for v in test.values)
    if isinstance(test, ast.Compare):
        taken = _compared(test, fn, call)
        return taken is not None and taken != arm
    if not isinstance(test, ast.Name):
        return False
    value = _argument(fn, call, test.id)
    return isinstance(value, ast.Constant) and bool(value.value) != arm


def _spread(call: ast.Call, where: ast.AST, ctx: Context) -> ast.Call:
    """``call`` with each ``**kw`` whose name is bound before it to a dict literal of constant
    string keys spelled out as keywords (``train_or_test_epoch(loader, **shared)`` with
    ``shared = {"is_train": False, "optimizer": None}``: AutoDL's test epoch), so that
    :func:`_argument` reads the flags it passes; ``call`` itself otherwise."""
    if not any(k.arg is None and isinstance(k.value, ast.Name) for k in call.keywords):
        return call
    scope = ctx.scope(where)
    kws: list[ast.keyword] = []
    for k in call.keywords:
        b = scope.binding_before(k.value.id, call.lineno) \
            if k.arg is None and isinstance(k.value, ast.Name) else None
        d = getattr(b, "value", None)
        if isinstance(d, ast.Dict) and all(isinstance(x, ast.Constant) and isinstance(
                x.value, str) for x in d.keys):
            kws.extend(ast.keyword(arg=x.value, value=v)  # type: ignore[union-attr]
                       for x, v in zip(d.keys, d.values))
        else:
            kws.append(k)
    return ast.copy_location(ast.Call(func=call.func, args=call.args, keywords=kws), call)


def _literals(e: ast.expr) -> list[object] | None:
    """The constants ``e`` spells: one constant, or a list/tuple/set of constants."""
    if isinstance(e, ast.Constant):
        return [e.value]
    if isinstance(e, (ast.List, ast.Tuple, ast.Set)) and all(
            isinstance(x, ast.Constant) for x in e.elts):
        return [x.value for x in e.elts]  # type: ignore[attr-defined]
    return None


def _compared(test: ast.Compare, fn: ast.FunctionDef | ast.AsyncFunctionDef,
              call: ast.Call) -> bool | None:
    """The value of ``param == "train"`` / ``param in ["train"]`` (and ``!=``, ``not in``,
    ``param is None`` / ``is not None``, ``param is False`` / ``is True``) for ``call``, when it passes ``param`` a constant
    (or leaves it to a constant default); None when not known."""
    if len(test.ops) != 1 or not isinstance(test.left, ast.Name):
        return None
    op, right = test.ops[0], _literals(test.comparators[0])
    value = _argument(fn, call, test.left.id)
    if right is None or not isinstance(value, ast.Constant):
        return None
    v = value.value
    if isinstance(op, (ast.Eq, ast.NotEq)) and len(right) == 1 \
            and isinstance(test.comparators[0], ast.Constant):
        return (v == right[0]) == isinstance(op, ast.Eq)
    if isinstance(op, (ast.In, ast.NotIn)) and not isinstance(test.comparators[0], ast.Constant):
        return (v in right) == isinstance(op, ast.In)
    if isinstance(op, (ast.Is, ast.IsNot)) and len(right) == 1 \
            and any(right[0] is c for c in (None, True, False)):
        # `if optim is not None: backward`, `if is_validation is False: backward`
        return (v is right[0]) == isinstance(op, ast.Is)
    return None


def _argument(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
              name: str) -> ast.expr | None:
    """The expression ``call`` binds to parameter ``name`` of ``fn`` (its default if left
    out), or None when unknown (``*args``/``**kw`` at the call)."""
    for k in call.keywords:
        if k.arg == name:
            return k.value
        if k.arg is None:
            return None
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    if pos and pos[0].arg in ("self", "cls") and isinstance(call.func, ast.Attribute):
        pos = pos[1:]
    names = [p.arg for p in pos]
    if name in names:
        i = names.index(name)
        if any(isinstance(x, ast.Starred) for x in call.args[:i + 1]):
            return None
        if i < len(call.args):
            return call.args[i]
        defaults = a.defaults
        j = i - (len(names) - len(defaults))
        return defaults[j] if 0 <= j < len(defaults) else None
    kw = [x.arg for x in a.kwonlyargs]
    if name in kw:
        return a.kw_defaults[kw.index(name)]
    return None
