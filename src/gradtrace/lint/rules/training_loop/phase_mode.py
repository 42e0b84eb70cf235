"""GT541: one forward serves the training and the evaluation phase, in train mode for both."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.fixed_args import fixed_by_callers
from gradtrace.lint.analysis.inherited_callers import base_switches_mode
from gradtrace.lint.context import LOOP_TYPES, Context
from gradtrace.lint.nodes import of_types, scope_nodes, scope_statements
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop.eval_mode import (
    TRAINING_ATTRS, _eval_up, _mode_switch, _runs_mode_model)
from gradtrace.lint.rules.training_loop._modes import function_effects

Def = ast.FunctionDef | ast.AsyncFunctionDef


def _trains(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(f := n.func, ast.Attribute)  # type: ignore[attr-defined]
               and f.attr in TRAINING_ATTRS for s in stmts for n in of_types(s, (ast.Call,)))


def _phase_names(test: ast.AST) -> set[str]:
    """The names a phase test reads: ``phase == 'train'``, ``mode != "val"``, ``training``,
    ``not is_eval``, ``self.training`` is not one (the module's own mode)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Name):
        return {test.id}
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
        sides = [test.left, *test.comparators]
        if any(isinstance(c, ast.Constant) and isinstance(c.value, str) for c in sides):
            return {s.id for s in sides if isinstance(s, ast.Name)}
    return set()


def _phased(name: str, fn: ast.AST, loops: list[ast.stmt], ctx: Context) -> bool:
    """``name`` takes more than one value where it is tested: a parameter of ``fn`` (the
    function is called for either phase) unless every call gives it one constant
    (NOTE [argument fixed by every caller]), or the variable of a loop over a literal of several
    phases (``for phase in ('train', 'val')``)."""
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            a.arg == name for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)):
        return not fixed_by_callers(ctx, fn, name)
    return any(isinstance(lp, (ast.For, ast.AsyncFor)) and isinstance(lp.target, ast.Name)
               and lp.target.id == name and isinstance(lp.iter, (ast.Tuple, ast.List))
               and len(lp.iter.elts) > 1 for lp in loops)


class PhaseSharedForwardInTrainMode(Rule):
    """The same forward runs the training and the evaluation phase (`if phase == 'train':`
    guards only the backward and the step), and nothing puts the model in eval mode for the
    other phase.

    Why: a loop over `('train', 'val')`, or a step function given a phase or an
    `is_training` flag, runs `model(x)` for both phases and trains only in one. Without
    `model.eval()` for the evaluation phase (or with a `model.train()` at the top of the
    shared code) dropout keeps dropping activations and batch norm normalises with each
    validation batch's statistics and moves its running statistics toward validation data:
    the reported validation loss and accuracy are those of a randomly thinned network, and
    the dropout draws shift the global RNG for every later epoch (as791/ZOO_Attack_PyTorch#7,
    princeton-vl/pytorch_stacked_hourglass#44; checked on torch 2.13). Switch modes by the
    phase: `model.train(phase == 'train')`, or `model.train()` / `model.eval()` in the two
    branches.
    Known limits: the phase is a parameter of the function or the variable of a loop over a
    literal of phases, tested by `==`/`!=` against a string or as a flag; the model's class or
    constructor must show a dropout or batch-norm layer; a function or a caller that calls
    `.eval()` or `.train(<not True>)` anywhere is trusted, and so is a method of a base class
    in another file of the project that calls the method and switches modes
    (NOTE [template callers]).
    """

    code = "GT541"
    name = "phase-shared-forward-in-train-mode"
    message = ("`{call}` runs `{model}` for every phase of `{test}` (line {line}), which "
               "guards only the backward and the step, and {why}: the evaluation phase runs "
               "dropout and batch norm in train mode (noisy metrics, running statistics moved "
               "toward evaluation data); switch modes by the phase (`.train({test_src})`)")
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for phase in ("train", "val"):
                for x, y in loaders[phase]:
                    loss = nn.functional.cross_entropy(net(x), y)
                    if phase == "train":
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """, at=(7, 4)),
        Good("""
            import torch
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for phase in ("train", "val"):
                net.train(phase == "train")
                for x, y in loaders[phase]:
                    loss = nn.functional.cross_entropy(net(x), y)
                    if phase == "train":
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """),
    ]

    def visit_FunctionDef(self, node: Def, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward(") or not isinstance(fn, ast.Module) \
                and ".backward(" not in ctx.code_of(fn):
            return
        ifs = [n for n in ctx.memo("scope-statements", fn, lambda: scope_statements(fn))
               if isinstance(n, ast.If) and _trains(n.body) and not _trains(n.orelse)
               and _phase_names(n.test)]
        if not ifs:
            return
        nodes = list(scope_nodes(fn))
        loops = [n for n in nodes if isinstance(n, LOOP_TYPES)]
        if any(_mode_switch(n, ctx, fn) for n in nodes) or isinstance(
                fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                "eval" in ms for ms in function_effects(ctx, fn, 0).values()):
            return
        for branch in ifs:
            around = [lp for lp in loops if _holds(lp, branch)]
            if not any(_phased(name, fn, around, ctx) for name in _phase_names(branch.test)):
                continue
            got = self._forward(fn, branch, nodes, around, ctx)
            if got is None:
                continue
            call, model = got
            train = self._train_call(fn, call, nodes)
            if train is None and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and (_eval_up(ctx, fn, 0) or base_switches_mode(ctx, fn)):
                continue
            inner = [lp for lp in around if _holds(lp, call)]
            at: ast.AST = train if train is not None else \
                max(inner, key=lambda lp: lp.lineno) if inner else call
            test_src = ctx.source(branch.test)
            why = (f"`{ctx.source(train)}` (line {train.lineno}) puts it in train mode for "
                   "all of them") if train is not None else "nothing puts it in eval mode"
            yield self.report(at, ctx, related=(Related(
                ctx.path, branch.lineno, "only the training phase steps here",
                ctx.column(branch)),), call=" ".join(ctx.source(call).split())[:50],
                model=model, test=test_src[:40], line=branch.lineno, why=why,
                test_src=test_src[:40])
            return

    @staticmethod
    def _forward(fn: ast.AST, branch: ast.If, nodes: list[ast.AST], around: list[ast.stmt],
                 ctx: Context) -> tuple[ast.Call, str] | None:
        """The model call before ``branch`` in the same pass (inside the loops around it,
        outside ``branch``) that runs a module with dropout or batch norm."""
        for n in sorted((n for n in nodes if isinstance(n, ast.Call)),
                        key=lambda n: (n.lineno, n.col_offset)):
            if n.lineno >= branch.lineno or not all(_holds(lp, n) for lp in around):
                continue
            k = _runs_mode_model(ctx, n, fn)
            if k is not None:
                return n, ctx.source(n.func)
        return None

    @staticmethod
    def _train_call(fn: ast.AST, call: ast.Call, nodes: list[ast.AST]) -> ast.Call | None:
        """A ``.train()`` of no argument before ``call`` (it does not depend on the phase)."""
        return next((n for n in nodes if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr == "train"
                     and not n.args and not n.keywords and n.lineno <= call.lineno), None)


def _holds(outer: ast.AST, inner: ast.AST) -> bool:
    """``inner`` sits in ``outer`` (by lines; not ``outer`` itself)."""
    o, i = outer, inner
    return o.lineno <= i.lineno <= (o.end_lineno or 0) and o is not i \
        and (o.lineno, o.col_offset) != (i.lineno, i.col_offset)  # type: ignore[attr-defined]
