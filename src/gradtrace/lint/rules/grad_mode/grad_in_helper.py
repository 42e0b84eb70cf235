"""GT210: a helper that builds an output and differentiates it, called under no_grad."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.context import Context, grad_mode_of
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says_word
from gradtrace.lint.rules.grad_mode.global_state import SETTERS, _flag, _is_false
from gradtrace.lint.rules.grad_mode.reenable import GRADIENT_CALLS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.analysis.grad_off_calls import _targets, computed, made_names, off_list
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.rules.grad_mode._deep_gradient import deep_gradient, forward_start


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
                    grad_mode_of(i.context_expr, ctx.imports) for i in s.items):
                continue  # the helper chose its own grad mode there
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
            target = c.args[0] if q in GRADIENT_CALLS and c.args else (
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


class GradientHelperUnderNoGrad(Rule):
    """A function that runs a model and differentiates its output (`autograd.grad`, a
    Jacobian or gradient-norm penalty, `backward()`) is called inside `torch.no_grad()` or
    `inference_mode()`.

    Why: the helper's forward then records no graph: its output has no `grad_fn` and the
    gradient call raises `RuntimeError: element 0 of tensors does not require grad and does
    not have a grad_fn` (a validation loop under `no_grad` reusing the training loss that
    holds a gradient penalty; checked on torch 2.13). Call it outside the block, or wrap the
    gradient part of the helper in `torch.enable_grad()` (under `no_grad` only: it does not
    undo `inference_mode`, see GT208).
    The same holds after `torch.set_grad_enabled(False)` written as a statement: grad stays
    off for the statements that follow it in its block, up to the call that turns it back on
    (an evaluation that runs an adversarial attack before its `torch.set_grad_enabled(True)`).
    A function decorated with `@torch.no_grad()` or `@torch.inference_mode()` is such a block
    (reported at the decorator). When the helper is not called by the block itself but by a
    function the block runs (an evaluation method that fits a probe, a loss module that
    caches gradients with `loss.backward()` in its `forward`, an environment reset that warms
    up a trajectory optimizer), the finding is on that call
    (NOTE [gradient reached through the callee]). When the gradient is taken in a module's
    own `forward` (test-time adaptation), the finding is where that work starts in `forward`
    (NOTE [gradient taken in a module's forward]).
    Known limits: the helper must be a function or method of this file called in the block
    (or between the statement and the first statement of its block that can turn grad back
    on), or up to three calls below, and compute the differentiated output itself; a gradient
    under a test of a flag passed down, and a call under a test of grad mode or training, are
    left alone.
    """

    code = "GT210"
    name = "gradient-helper-under-no-grad"
    message = ("`{mode}` covers `{call}`, which runs a forward and differentiates it "
               "(`{grad}`, line {line}): with no graph recorded the gradient call raises "
               "`element 0 of tensors does not require grad`; call it outside the block or "
               "wrap its gradient part in `torch.enable_grad()`")
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def jacobian_loss(model, x, y):
                x = x.clone().requires_grad_(True)
                out = model(x)
                jac = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
                return (out - y).pow(2).mean() + jac.norm()

            def validate(model, loader):
                with torch.no_grad():
                    return sum(jacobian_loss(model, x, y).item() for x, y in loader)
            """, at=(10, 4)),
        Good("""
            import torch

            def jacobian_loss(model, x, y):
                x = x.clone().requires_grad_(True)
                out = model(x)
                jac = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
                return (out - y).pow(2).mean() + jac.norm()

            def validate(model, loader):
                return sum(jacobian_loss(model, x, y).item() for x, y in loader)
            """),
        Good("""
            import torch

            def train_step(loss, opt):
                loss.backward()
                opt.step()

            def run(model, x, opt):
                loss = model(x).sum()
                with torch.no_grad():
                    train_step(loss, opt)
            """),
        Bad("""
            import torch

            def attack(model, x, y, eps):
                x = x.clone().requires_grad_(True)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                return (x + eps * x.grad.sign()).detach()

            def evaluate_robust(model, loader, eps):
                torch.set_grad_enabled(False)
                errors = [(model(attack(model, x, y, eps)).argmax(1) != y).sum() for x, y in loader]
                torch.set_grad_enabled(True)
                return errors
            """, at=(10, 4)),
        Good("""
            import torch

            def attack(model, x, y, eps):
                x = x.clone().requires_grad_(True)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                return (x + eps * x.grad.sign()).detach()

            def evaluate_robust(model, loader, eps):
                adv = [(attack(model, x, y, eps), y) for x, y in loader]
                torch.set_grad_enabled(False)
                errors = [(model(x).argmax(1) != y).sum() for x, y in adv]
                torch.set_grad_enabled(True)
                return errors
            """),
        Bad("""
            import torch
            import torch.nn.functional as F

            def fit_probe(feats, labels):
                probe = torch.nn.Linear(feats.shape[1], 2)
                loss = F.cross_entropy(probe(feats), labels)
                loss.backward()
                return probe

            class Evaluator:
                def score(self, encoder, x, y):
                    probe = fit_probe(encoder(x), y)
                    return (probe(encoder(x)).argmax(1) == y).float().mean()

            def validate(ev, encoder, x, y):
                with torch.no_grad():
                    return ev.score(encoder, x, y)

            validate(Evaluator(), torch.nn.Linear(4, 3), torch.randn(5, 4), torch.zeros(5).long())
            """, at=(12, 16)),
        Good("""
            import torch
            import torch.nn.functional as F

            def fit_probe(feats, labels):
                probe = torch.nn.Linear(feats.shape[1], 2)
                loss = F.cross_entropy(probe(feats), labels)
                loss.backward()
                return probe

            class Evaluator:
                def score(self, encoder, x, y):
                    with torch.enable_grad():
                        probe = fit_probe(encoder(x).detach(), y)
                    return (probe(encoder(x)).argmax(1) == y).float().mean()

            def validate(ev, encoder, x, y):
                with torch.no_grad():
                    return ev.score(encoder, x, y)

            validate(Evaluator(), torch.nn.Linear(4, 3), torch.randn(5, 4), torch.zeros(5).long())
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        mode = next((i.context_expr for i in node.items if disables_grad(i.context_expr, ctx)),
                    None)
        if mode is None or not _differentiates(ctx):
            return
        where = ctx.function or ctx.tree
        calls = [n for s in node.body for n in bfs_walk(s) if isinstance(n, ast.Call)]
        yield from self._region(node, mode, node, calls, where, ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        """A function decorated with ``@torch.no_grad()`` / ``@torch.inference_mode()`` runs
        its body as a ``with`` block would; the direct reading is reported at the
        decorator."""
        mode = next((d for d in node.decorator_list if disables_grad(d, ctx)), None)
        if mode is None or not _differentiates(ctx):
            return
        # a function handed in (an optimizer's `closure`, GT213's), or rebound here
        # (`closure = torch.enable_grad()(closure)`), is not read as the helper it names
        given = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        given.update(t.id for n in off_list(ctx, node) if isinstance(n, ast.Assign)
                     for t in n.targets if isinstance(t, ast.Name))
        calls = sorted((n for n in off_list(ctx, node) if isinstance(n, ast.Call)
                        and not (isinstance(n.func, ast.Name) and n.func.id in given)),
                       key=lambda n: (n.lineno, n.col_offset))
        yield from self._region(mode, mode, node, calls, node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _region(self, at: ast.AST, mode: ast.expr, owner: ast.AST, calls: list[ast.Call],
                where: ast.AST, ctx: Context) -> Iterator[Finding]:
        made: set[str] | None = None
        for n in calls:
            target = resolve(ctx, where, n)
            grad = _own_gradient(ctx, target[0], _spread(n, where, ctx)) \
                if target is not None else next((g for fn, _ in _targets(n, where, ctx)
                                                 if fn.name == "forward" and (
                                                     g := _own_gradient(ctx, fn, n, True))), None)
            if grad is None and _differentiates(ctx):
                if made is None:
                    made = made_names(off_list(ctx, owner), where, ctx)
                grad = next((g for fn, binds in _targets(n, where, ctx) if binds is not None
                             and (g := _given_gradient(ctx, fn, binds, made, where))), None)
            if grad is None:
                continue
            inner = forward_start(ctx, grad)  # NOTE [gradient taken in a module's forward]
            yield self.report(inner or at, ctx, related=(*(() if inner is None else (
                Related(ctx.path, at.lineno, f"`{ctx.source(mode)}` turns grad off here",
                        ctx.column(at)),)), Related(
                ctx.path, grad.lineno, "the gradient is taken here", ctx.column(grad))),
                mode=ctx.source(mode), call=ctx.source(n.func) + "(...)",
                grad=ctx.source(grad.func), line=grad.lineno)
            return
        deep = deep_gradient(ctx, owner, where, _own_gradient)
        if deep is not None:  # NOTE [gradient reached through the callee]
            n, grad = deep
            inner = forward_start(ctx, grad)
            yield self.report(inner or n, ctx, related=(
                Related(ctx.path, at.lineno, f"`{ctx.source(mode)}` turns grad off here",
                        ctx.column(at)),
                *(() if inner is None else (Related(ctx.path, n.lineno, "the module runs "
                                                    "here, grad still off", ctx.column(n)),)),
                Related(ctx.path, grad.lineno, "the gradient is taken here", ctx.column(grad))),
                mode=ctx.source(mode), call=ctx.source(n.func) + "(...)",
                grad=ctx.source(grad.func), line=grad.lineno)

    visit_AsyncWith = visit_With

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        """``torch.set_grad_enabled(False)`` as a statement: grad is off for the statements
        after it in its block until one that can turn it back on."""
        call = node.value
        if not isinstance(call, ast.Call) or ctx.qualified_name(call.func) not in SETTERS \
                or not _is_false(_flag(call)) or ctx.grad_disabled is not None \
                or not _differentiates(ctx):
            return
        block = _block_of(node, ctx)
        if block is None:
            return
        where = ctx.function or ctx.tree
        for s in block[block.index(node) + 1:]:
            if _turns_on(s, ctx):
                return
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # defined here, not run here
            for n in bfs_walk(s):
                if not isinstance(n, ast.Call) or n.lineno < s.lineno:
                    continue
                target = resolve(ctx, where, n)
                grad = _own_gradient(ctx, target[0], n) if target is not None else None
                if grad is None:
                    continue
                yield self.report(node, ctx, related=(
                    Related(ctx.path, n.lineno, f"`{ctx.source(n.func)}(...)` runs with grad "
                            "still off", ctx.column(n)),
                    Related(ctx.path, grad.lineno, "the gradient is taken here",
                            ctx.column(grad))),
                    mode=ctx.source(call), call=ctx.source(n.func) + "(...)",
                    grad=ctx.source(grad.func), line=grad.lineno)
                return


def _block_of(node: ast.stmt, ctx: Context) -> list[ast.stmt] | None:
    """The statement list that holds ``node`` (its parent's body, orelse, ...)."""
    parent = ctx.stmts[-2] if len(ctx.stmts) > 1 else ctx.tree
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(x is node for x in block):
            return block
    for h in getattr(parent, "handlers", ()) or ():
        if any(x is node for x in h.body):
            return h.body
    return None


def _turns_on(s: ast.stmt, ctx: Context) -> bool:
    """``s`` holds a call that can turn grad back on (``set_grad_enabled`` with anything but
    ``False``, ``enable_grad``)."""
    for n in bfs_walk(s):
        if isinstance(n, ast.Call):
            q = ctx.qualified_name(n.func)
            if q in SETTERS and not _is_false(_flag(n)) or q == "torch.enable_grad":
                return True
    return False
