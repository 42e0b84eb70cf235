"""GT475, GT476: `requires_grad` settings that cannot change anything: a "freeze" loop that
sets `True` on a model nothing froze, and an unfreeze that only visits parameters which
already require grad."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.params import FLAG, PARAM_ITERS
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_false, is_true, node_mentions
from gradtrace.lint.rules.registration._frozen import _inner_flag_stmt
from gradtrace.lint.rules.registration._grad_flags import GradFlag, grad_flags
from gradtrace.lint.rules.registration._modules import owns_params

# calls that give back a whole pickled module (its parameters keep the flags they were saved
# with), unlike a constructor or a `from_pretrained`, whose parameters all require grad
UNPICKLERS = frozenset({"torch.load", "torch.jit.load", "pickle.load", "joblib.load",
                        "dill.load", "copy.deepcopy", "copy.copy"})


def _built_fresh(scope: Scope, base: str, line: int) -> ast.Call | None:
    """The call ``base`` is bound to before ``line`` when it builds a model whose parameters
    all require grad: a constructor or factory, not an unpickled module, not a helper of the
    file that sets flags itself."""
    b = scope.binding_before(base, line)
    if b is None or not isinstance(b.value, ast.Call) or len(scope.bindings.get(base, ())) > 1:
        return None
    ctx = scope.ctx
    q = ctx.call_name(b.value) or ""
    if q in UNPICKLERS or q.rpartition(".")[2] in ("load", "deepcopy"):
        return None
    f = b.value.func
    own = ctx.analysis.functions.get(f.id) if isinstance(f, ast.Name) else None
    if own is not None and node_mentions(ctx, own, FLAG):
        return None
    return b.value


def _flag_set_before(ctx: Context, f: GradFlag, flags: list[GradFlag], base: str) -> bool:
    """A flag other than ``True`` set before ``f`` in the file, or ``base`` handed before it
    to a helper of the file that sets flags (``freeze(model)``)."""
    if any(not g.value or g.conditional for g in flags if g.stmt.lineno < f.stmt.lineno):
        return True
    for line in ctx.code_lines[:f.stmt.lineno - 1]:
        if FLAG in line and ("False" in line or "freeze" in line.lower()):
            return True
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Call) and getattr(n, "lineno", 0) < f.stmt.lineno \
                and isinstance(n.func, ast.Name) and n.func.id in ctx.analysis.functions \
                and any(dotted(a) and dotted(a).partition(".")[0] == base for a in n.args) \
                and node_mentions(ctx, ctx.analysis.functions[n.func.id], FLAG):
            return True
    return False


def _head_after(scope: Scope, root: str, after: int) -> ast.Assign | None:
    """``root.fc = nn.Linear(...)`` (or ``root.classifier[6] = ...``) after line ``after``:
    a new head, the second half of the freeze-then-replace-the-head idiom."""
    for s in scope.stmts:
        if s.lineno <= after or not isinstance(s, ast.Assign) or len(s.targets) != 1:
            continue
        t = s.targets[0]
        name = dotted(t.value if isinstance(t, ast.Subscript) else t) or ""
        if name.startswith(root + ".") and owns_params(s.value, scope.ctx):
            return s
    return None


class FreezeLoopSetsTrue(Rule):
    """A loop meant to freeze a freshly built model sets `requires_grad = True`: nothing is
    frozen.

    Why: every parameter of a module built by a constructor or `from_pretrained` already
    requires grad (loading a `state_dict` does not change the flag), so
    `for p in model.parameters(): p.requires_grad = True` changes nothing. Followed by a new
    head (`model.fc = nn.Linear(...)`), the freeze-the-backbone idiom, it leaves the
    pretrained layers training with the head: the optimizer built on `model.parameters()`
    moves them at the head's learning rate. To freeze, set `False` before replacing the head.
    Known limits: statements of one scope; a model bound once, by a call that is not a
    `torch.load` nor a helper of the file that sets flags; no `requires_grad = False` earlier
    in the file.
    """

    code = "GT475"
    name = "freeze-loop-sets-true"
    message = ("every parameter of `{root}` already requires grad (built at line {built}): "
               "setting `True` freezes nothing before the new head `{head}` (line {line}); "
               "set `requires_grad = False` to freeze it")
    triggers = (FLAG,)
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn, torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            for p in model.parameters():
                p.requires_grad = True
            model.fc = nn.Linear(512, 2)
            """, at=(4, 4)),
        Good("""
            import torch.nn as nn, torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            for p in model.parameters():
                p.requires_grad = False
            model.fc = nn.Linear(512, 2)
            """),
        Good("""
            import torch.nn as nn, torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            model.requires_grad_(False)
            for p in model.layer4.parameters():
                p.requires_grad = True
            model.fc = nn.Linear(512, 2)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(ctx.scope(node), ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node_mentions(ctx, node, FLAG):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        flags = grad_flags(scope)
        for f in flags:
            if not f.value or f.conditional:
                continue
            base = f.root.partition(".")[0]
            if base == "self" or base != f.root:
                continue  # a submodule unfrozen: a partial unfreeze, or of a frozen whole
            built = _built_fresh(scope, base, f.stmt.lineno)
            if built is None or _flag_set_before(ctx, f, flags, base):
                continue
            head = _head_after(scope, f.root, f.stmt.end_lineno or f.stmt.lineno)
            if head is None or scope.exclusive(f.stmt, head):
                continue
            yield self.report(_inner_flag_stmt(f), ctx, related=[Related(
                ctx.path, head.lineno, "the new head")], root=f.root, built=built.lineno,
                head=dotted(head.targets[0]) or ctx.source(head.targets[0]), line=head.lineno)


def _gated_var(test: ast.expr, var: str) -> bool:
    """``var.requires_grad`` (``is True``, ``== True``) as the whole test."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.Is, ast.Eq)) and is_true(test.comparators[0]):
        test = test.left
    return isinstance(test, ast.Attribute) and test.attr == FLAG and dotted(test.value) == var


def _set_value(s: ast.AST, var: str) -> ast.expr | None:
    """The value ``s`` sets the flag of ``var`` to (``var.requires_grad = v`` or
    ``var.requires_grad_(v)``)."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        t = s.targets[0]
        if isinstance(t, ast.Attribute) and t.attr == FLAG and dotted(t.value) == var:
            return s.value
    call = s.value if isinstance(s, ast.Expr) else s
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
            and call.func.attr == "requires_grad_" and dotted(call.func.value) == var:
        return call.args[0] if call.args else ast.Constant(value=True)
    return None


def _may_unfreeze(v: ast.expr, fn: ast.AST | None, var: str) -> bool:
    """``True``, or a flag that does not depend on the parameter: an argument of the
    function (``trainable``), ``not frozen``, ``self.trainable``. A value computed from the
    parameter or its name decides per parameter (a narrowing freeze), and ``False`` only
    freezes."""
    if is_false(v):
        return False
    if is_true(v):
        return True
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not):
        v = v.operand
    if isinstance(v, ast.Attribute) and dotted(v) and dotted(v).startswith("self."):
        return True
    if not isinstance(v, ast.Name) or v.id == var:
        return False
    args = getattr(fn, "args", None)
    return args is not None and v.id in {a.arg for a in (*args.posonlyargs, *args.args,
                                                         *args.kwonlyargs)}


def _params_iter(it: ast.expr) -> bool:
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
        and it.func.attr in PARAM_ITERS


def _filtered_by_flag(it: ast.expr, ctx: Context) -> bool:
    """``filter(lambda p: p.requires_grad, m.parameters())`` or ``(p for p in
    m.parameters() if p.requires_grad)``."""
    if isinstance(it, ast.Call) and (ctx.call_name(it) or "") == "filter" and len(it.args) == 2:
        fn, src = it.args
        return isinstance(fn, ast.Lambda) and len(fn.args.args) == 1 \
            and _gated_var(fn.body, fn.args.args[0].arg) and _params_iter(src)
    if isinstance(it, (ast.GeneratorExp, ast.ListComp)) and len(it.generators) == 1:
        g = it.generators[0]
        var = dotted(g.target) if not isinstance(g.target, ast.Tuple) else dotted(g.target.elts[-1])
        return var is not None and _params_iter(g.iter) and len(g.ifs) == 1 \
            and _gated_var(g.ifs[0], var) and dotted(it.elt) == var
    return False


class UnfreezeGatedOnRequiresGrad(Rule):
    """`if p.requires_grad: p.requires_grad = trainable`: the unfreeze only visits
    parameters that already require grad, so it can never unfreeze one.

    Why: setting the flag to `True` on a parameter that already requires grad changes
    nothing, and the frozen parameters, the only ones an unfreeze is for, are skipped by the
    test. After `set_trainable(False)`, `set_trainable(True)` leaves every parameter frozen:
    fine-tuning silently trains only what was built afterwards (a new head). Set the flag on
    every parameter: `for p in self.parameters(): p.requires_grad = trainable`.
    Known limits: the value must be `True` or a flag that does not depend on the parameter (an
    argument of the function, `self.<flag>`); the test is the flag itself (an `if`, a
    `filter`, or a generator's condition).
    """

    code = "GT476"
    name = "unfreeze-gated-on-requires-grad"
    message = ("only parameters of `{owner}` that already require grad reach this line, so "
               "setting `requires_grad = {value}` can never unfreeze one; set it on every "
               "parameter")
    triggers = (FLAG,)
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn

            def set_trainable(model, trainable=False):
                for p in model.parameters():
                    if p.requires_grad:
                        p.requires_grad = trainable
            """, at=(5, 8)),
        Bad("""
            import torch.nn as nn

            def unfreeze(model):
                for p in filter(lambda q: q.requires_grad, model.parameters()):
                    p.requires_grad_(True)
            """, at=(4, 4)),
        Good("""
            import torch.nn as nn

            def set_trainable(model, trainable=False):
                for p in model.parameters():
                    p.requires_grad = trainable

            def freeze_trainable(model, keep):
                for n, p in model.named_parameters():
                    if p.requires_grad:
                        p.requires_grad = n in keep
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        t = node.target
        var = dotted(t.elts[-1]) if isinstance(t, ast.Tuple) and t.elts else dotted(t)
        if var is None:
            return
        fn = ctx.function
        if _filtered_by_flag(node.iter, ctx):
            for s in node.body:
                v = _set_value(s, var)
                if v is not None and _may_unfreeze(v, fn, var):
                    yield self._found(node, ctx, node.iter, v)
                    return
            return
        if not _params_iter(node.iter):
            return
        for s in node.body:
            if isinstance(s, ast.If) and _gated_var(s.test, var) and not s.orelse:
                for inner in s.body:
                    v = _set_value(inner, var)
                    if v is not None and _may_unfreeze(v, fn, var):
                        yield self._found(s, ctx, node.iter, v)
                        return

    def _found(self, at: ast.AST, ctx: Context, it: ast.expr, v: ast.expr) -> Finding:
        owners = [dotted(n.func.value) for n in walk(it) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Attribute) and n.func.attr in PARAM_ITERS]
        return self.report(at, ctx, owner=owners[0] if owners and owners[0] else "the model",
                           value=ctx.source(v))
