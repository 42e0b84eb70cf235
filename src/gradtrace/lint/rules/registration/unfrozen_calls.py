"""GT448: a method or helper unfreezes parameters that a trainable-only optimizer left out."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, OPTIMIZER
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, function_scopes, scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._grad_flags import flag_statement, grad_flags
from gradtrace.lint.rules.registration._modules import (
    OptimizerBuild, covers, optimizer_builds, rebound_between, step_lines,
)
from gradtrace.lint.rules.registration.freezing import trainable_only_filter


def _filters_trainable(ob: OptimizerBuild, scope: Scope) -> bool:
    """The optimizer keeps only parameters with ``requires_grad`` (in its call or in the
    file's helper that builds it)."""
    if trainable_only_filter(ob.call, scope):
        return True
    fn = scope.ctx.analysis.local_callee(ob.call, scope, ob.stmt.lineno)
    return fn is not None and any(
        isinstance(n, ast.Attribute) and n.attr == "requires_grad"
        and isinstance(n.ctx, ast.Load) for n in bfs_walk(fn))


def _helper_builds(scope: Scope) -> list[OptimizerBuild]:
    """``opt = build_optimizer(model, ...)``: a helper of the file that returns an optimizer
    and filters on ``requires_grad``, over the modules it is given (the analysis cannot say
    which parameters a list built in a loop holds)."""
    ctx = scope.ctx
    an = ctx.analysis
    out = []
    for name, bs in scope.bindings.items():
        for b in bs:
            v = b.value
            if not isinstance(v, ast.Call) or not isinstance(v.func, ast.Name):
                continue
            fn = an.local_callee(v, scope, b.line)
            k = an.returns(fn) if fn is not None else None
            if k is None or k.what != OPTIMIZER or k.over:
                continue
            srcs = frozenset(d for a in v.args if (d := dotted(a))
                             and an.is_module(a, scope, b.line))
            if srcs:
                out.append(OptimizerBuild(name, b.stmt, v, srcs))
    return out


class UnfrozenByCallAfterOptimizer(Rule):
    """A method (or helper) called after the optimizer was built sets `requires_grad = True`
    on parameters the optimizer left out because they were frozen then.

    Why: an optimizer built from the trainable parameters only (`if not p.requires_grad:
    continue`, `filter(lambda p: p.requires_grad, ...)`, often inside a `build_optimizer`
    helper) never holds the frozen ones. A later `model.unfreeze_head()` gives them gradients,
    but `step()` never updates them: silent (detectron2's box head unfrozen at an iteration;
    checked on torch 2.13). Add them with `opt.add_param_group({"params": ...})` after the
    unfreeze, or build the optimizer over all parameters (frozen ones have no gradient and are
    skipped until they get one).
    Known limits: the method must be called on an instance the analysis knows to be of its
    class (or the helper be of this file, given the module), in the function (or script)
    that built the optimizer and steps it afterwards.
    """

    code = "GT448"
    needs_step = True  # NOTE [step files]
    name = "unfrozen-by-call-after-optimizer"
    message = ("`{root}` is unfrozen here, called at line {line} after `{opt}` was built from "
               "the then-trainable parameters only (line {built}): `{opt}.step()` never "
               "updates them; add them with `{opt}.add_param_group(...)`")
    triggers = ("requires_grad",)
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 2)
                    self.body.requires_grad_(False)
                def unfreeze(self):
                    self.body.requires_grad_(True)
            net = Net()
            opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
            for epoch in range(4):
                if epoch == 2:
                    net.unfreeze()
                opt.step()
            """, at=(10, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 2)
                    self.body.requires_grad_(False)
                def unfreeze(self):
                    self.body.requires_grad_(True)
            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(4):
                if epoch == 2:
                    net.unfreeze()
                opt.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if ctx.statement is not node or node.name == "__init__" or not ctx.mentions("optim"):
            return
        flags = [f for f in grad_flags(ctx.scope(node)) if f.value and not f.conditional]
        if not flags:
            return
        cls = ctx.analysis.class_of(node)
        names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        for flag in flags:
            head, _, rest = flag.root.partition(".")
            if cls is not None and head != "self" or cls is None and head not in names:
                continue
            for site, fn, owner in self._sites(node, cls, head, names, ctx):
                root = owner + ("." + rest if rest else "")
                got = self._stale(site, fn, root, ctx)
                if got is not None:
                    ob = got
                    at = flag_statement(flag.stmt)
                    yield self.report(at, ctx, related=[
                        Related(ctx.path, site.lineno, "called here", ctx.column(site)),
                        Related(ctx.path, ob.stmt.lineno, f"`{ob.name}` is built here",
                                ctx.column(ob.stmt))],
                        root=root, line=site.lineno, opt=ob.name, built=ob.stmt.lineno)
                    return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    @staticmethod
    def _sites(fn_def: ast.FunctionDef | ast.AsyncFunctionDef, cls: object, head: str,
               names: list[str], ctx: Context) -> Iterator[tuple[ast.Call, ast.AST, str]]:
        """(call, enclosing function, the caller's spelling of the module) for each call."""
        an = ctx.analysis
        if cls is None:
            i = names.index(head)
            for call, fn in an.call_sites(fn_def):
                arg = call.args[i] if i < len(call.args) else None
                if arg is not None and dotted(arg):
                    yield call, fn, dotted(arg)  # type: ignore[misc]
            return
        cname = getattr(cls, "name", "")
        for fn in function_scopes(ctx.tree):
            for n in scope_nodes(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == fn_def.name and dotted(n.func.value):
                    k = an.kind_in(n.func.value, fn, n.lineno)
                    if k is not None and k.what == MODULE \
                            and (k.cls or "").rpartition(".")[2] == cname:
                        yield n, fn, dotted(n.func.value)  # type: ignore[misc]

    @staticmethod
    def _stale(site: ast.Call, fn: ast.AST, root: str, ctx: Context) -> OptimizerBuild | None:
        scope = ctx.scope(fn)
        stmt = scope.statement_of(site)
        if stmt is None:
            return None
        loops = scope.loops_of(stmt)
        for ob in [*optimizer_builds(scope), *_helper_builds(scope)]:
            if ob.stmt.lineno >= stmt.lineno or not any(
                    covers(s, root) or covers(root, s) for s in ob.sources) \
                    or not _filters_trainable(ob, scope):
                continue
            if any(m.receiver == ob.name and m.stmt.lineno > ob.stmt.lineno
                   for m in scope.calls_to("add_param_group")):
                continue
            for line in step_lines(scope, ob.name):
                if rebound_between(scope, ob.name, ob.stmt.lineno, line):
                    continue
                if line > (stmt.end_lineno or stmt.lineno) or any(
                        lp.lineno <= line <= (lp.end_lineno or lp.lineno) for lp in loops):
                    return ob
        return None
