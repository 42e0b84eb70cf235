"""GT707: a closure given to `optimizer.step(closure)` never runs backward()."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.steps import backward_of, step_of
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.cuts import TENSOR_METHODS

Fn = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _torch_optimizer(recv: ast.expr, ctx: Context, where: ast.AST) -> bool:
    """The stepped object is built by a ``torch.optim`` class, whose ``step(closure)`` reads
    the gradients the closure's backward() leaves. Another optimizer (a Newton-CG that
    differentiates the returned loss itself) may want the loss without them."""
    k = ctx.analysis.kind_in(recv, where, recv.lineno)
    made = k.node.func if k is not None and isinstance(k.node, ast.Call) else None
    if k is None:  # `opt = optimizer(params)` with `optimizer=optim.LBFGS` as a default
        b = ctx.scope(where).binding_before(recv.id, recv.lineno) \
            if isinstance(recv, ast.Name) else None
        made = b.value.func if b is not None and isinstance(b.value, ast.Call) else None
        made = _default_of(made, where) if isinstance(made, ast.Name) else None
        if made is None:
            return False  # (`self.opt, sched = optimizers.get(name, ...)`: unknown)
    q = ctx.qualified_name(made) if made is not None else None
    if q is None or q.startswith("torch.optim."):
        return True
    if q in ctx.analysis.classes:
        return False  # an optimizer of the file: its own protocol
    return q == dotted(made)  # a class given as an argument (`optimizer=optim.LBFGS`), not
    # one imported from another library


def _default_of(name: ast.Name, fn: ast.AST) -> ast.expr | None:
    """The default value of ``fn``'s argument ``name`` (None: not an argument with one)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
             *zip(a.kwonlyargs, a.kw_defaults)]
    return next((d for arg, d in pairs if arg.arg == name.id and d is not None), None)


def _closure_arg(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "closure"), None)


def _local_def(name: str, where: ast.AST, line: int) -> ast.FunctionDef | None:
    """The last ``def name`` before ``line`` in the body of ``where`` (not in nested defs)."""
    found = None
    work = list(getattr(where, "body", []))
    while work:
        s = work.pop()
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if s.name == name and s.lineno < line and (found is None or s.lineno > found.lineno):
                found = s  # type: ignore[assignment]
            continue
        if isinstance(s, ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            work.extend(getattr(s, field, []) or [])
    return found


def _runs_backward(fn: ast.AST, ctx: Context, where: ast.AST, depth: int = 0) -> bool:
    """Whether ``fn`` may call backward: itself, through a function of this file (three calls
    deep), or, in the closure itself, through a call it cannot read (a callable it was given,
    another file's helper, a method of ``self`` not found): only torch calls, tensor and
    optimizer methods, module calls and builtins are known not to. A closure that assigns
    ``.grad`` itself supplies the gradients the step reads, as backward() would."""
    for n in walk(fn):
        if isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Store):
            return True  # it hands the optimizer gradients computed another way (autograd.grad)
        if not isinstance(n, ast.Call):
            continue
        if backward_of(n, ctx) is not None:
            return True
        hit = resolve(ctx, where if depth == 0 else fn, n) if depth < 3 else None
        if hit is not None:
            if _runs_backward(hit[0], ctx, where, depth + 1):
                return True
        elif depth == 0 and id(n) in _outcomes(fn) and not _known_call(n, ctx, where):
            return True
    return False


def _outcomes(fn: ast.AST) -> set[int]:
    """ids of the closure's calls whose value is dropped (a call statement) or is what it
    returns (through ``.item()``-like methods and one local name): a call of unknown code there
    may be the step that runs backward; one whose value feeds the loss is a forward."""
    out: set[int] = set()
    values: dict[str, ast.expr] = {}
    for n in walk(fn):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
            out.add(id(n.value))
        elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Name):
                    values[t.id] = n.value
    work = [fn.body] if isinstance(fn, ast.Lambda) else [
        n.value for n in walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    for _ in range(32):
        if not work:
            break
        r = work.pop()
        if isinstance(r, ast.Name) and r.id in values:
            work.append(values.pop(r.id))
        elif isinstance(r, ast.IfExp):
            work += [r.body, r.orelse]
        elif isinstance(r, ast.Call) and isinstance(r.func, ast.Attribute) \
                and r.func.attr in TENSOR_METHODS | {"item"}:
            work.append(r.func.value)
        elif isinstance(r, ast.Call):
            out.add(id(r))
    return out


def _known_call(call: ast.Call, ctx: Context, where: ast.AST) -> bool:
    """A call that does not run backward: torch, a builtin, a tensor/optimizer method, a module
    called on its input."""
    f = call.func
    qual = ctx.qualified_name(f) or ""
    if qual.startswith("torch.") or isinstance(f, ast.Name) and f.id in _BUILTINS:
        return True
    if isinstance(f, ast.Attribute) and (f.attr == "zero_grad" or f.attr in TENSOR_METHODS):
        return True
    try:
        k = ctx.analysis.kind_in(f, where, call.lineno)
    except Exception:  # pragma: no cover - a node the scope cannot place
        return False
    return k is not None and k.what == MODULE


_BUILTINS = frozenset({"len", "float", "int", "sum", "abs", "min", "max", "print", "range",
                       "list", "tuple", "zip", "enumerate", "isinstance", "round"})


def _assigned(fn: ast.AST) -> set[str]:
    out = set()
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        out |= {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for n in walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
    return out


class ClosureWithoutBackward(Rule):
    """The closure passed to `optimizer.step(closure)` returns a loss but never calls
    `backward()` (or just returns a loss computed before it).

    Why: an optimizer calls the closure to re-evaluate the model: LBFGS calls it several times
    per step and reads the gradients each call leaves in `.grad`. A closure that only computes
    the loss leaves no gradient at all (LBFGS sees none and stops at once; the weights never
    change); one that returns a loss computed outside gives the same value and gradient at
    every evaluation, so the line search stops after one iteration. Nothing raises. Write the
    closure as `zero_grad()`, forward, loss, `loss.backward()`, `return loss`. Known limits:
    the closure must be a `def` or `lambda` of the same function or module; a helper of another
    file it calls is assumed to run backward.
    """

    code = "GT707"
    name = "closure-without-backward"
    message = ("the closure passed to `{step}` {why}: the optimizer evaluates it to get the "
               "loss and the gradients it leaves in `.grad`, so {effect}; call "
               "`loss.backward()` inside the closure before returning the loss")
    severity = "warning"
    triggers = ("step",)
    examples = [
        Bad("""
            import torch

            def fit(model, x, y):
                opt = torch.optim.LBFGS(model.parameters())
                def closure():
                    opt.zero_grad()
                    return torch.nn.functional.mse_loss(model(x), y)
                opt.step(closure)
            """, at=(7, 8)),
        Bad("""
            import torch

            def fit(net, x, y):
                opt = torch.optim.LBFGS(net.parameters())
                for _ in range(5):
                    opt.zero_grad()
                    loss = net(x).sub(y).pow(2).mean()
                    loss.backward()
                    opt.step(closure=lambda: loss)
            """, at=(9, 8)),
        Good("""
            import torch

            def fit(model, x, y):
                opt = torch.optim.LBFGS(model.parameters())
                def closure():
                    opt.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    return loss
                opt.step(closure)
            """),
        Good("""
            import torch

            def fit(x0, f, steps=10):
                x = x0.clone().requires_grad_(True)
                opt = torch.optim.Adam([x], lr=0.05)
                for _ in range(steps):
                    value = f(x).sum()
                    g, = torch.autograd.grad(value, x)
                    def set_grad():
                        opt.zero_grad()
                        x.grad = g
                        return value
                    opt.step(set_grad)
                return x
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "step"):
            return
        arg = _closure_arg(node)
        if arg is None:
            return
        scope = ctx.scope()
        st = step_of(node, scope, node.lineno)
        if st is None or not st[1] or not _torch_optimizer(node.func.value, ctx, scope.node):
            return
        fn: Fn | None
        if isinstance(arg, ast.Lambda):
            fn = arg
        elif isinstance(arg, ast.Name):
            fn = _local_def(arg.id, scope.node, node.lineno) or (
                _local_def(arg.id, ctx.tree, node.lineno) if scope.node is not ctx.tree
                else None)
        else:
            return
        if fn is None or _runs_backward(fn, ctx, scope.node):
            return
        returned = [fn.body] if isinstance(fn, ast.Lambda) else [
            n.value for n in walk(fn) if isinstance(n, ast.Return) and n.value is not None]
        if not returned or any(isinstance(r, ast.Constant) for r in returned):
            return
        outside = isinstance(returned[-1], ast.Name) and returned[-1].id not in _assigned(fn)
        why = (f"returns `{returned[-1].id}`, computed before it, and never calls backward()"
               if outside else "returns the loss without calling backward()")
        clears = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr == "zero_grad" for n in walk(fn))
        effect = ("every evaluation gives the same loss and gradient (LBFGS stops after one "
                  "iteration)" if outside and not clears else "no gradient is ever computed "
                  "and no parameter changes")
        at = returned[-1]
        stmt = node if isinstance(fn, ast.Lambda) else next(
            n for n in walk(fn) if isinstance(n, ast.Return) and n.value is at)
        yield self.report(stmt, ctx, related=(Related(
            ctx.path, node.lineno, "the optimizer steps with it here", ctx.column(node)),),
            step=ctx.source(node.func), why=why, effect=effect)
