"""GT540: an evaluation function runs a model with dropout or batch norm in train mode."""
from __future__ import annotations

import ast
from typing import Callable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.grad_off_calls import called_kind, calls_of, off_nodes
from gradtrace.lint.analysis.kinds import MODULE, Kind
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, function_scopes, of_types, scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._modes import effects, function_effects
from gradtrace.lint.rules.training_loop.eval_carried import carried_finding, has_mode_layers
from gradtrace.lint.rules.training_loop.modes import _kind_has_mode_layers

Def = ast.FunctionDef | ast.AsyncFunctionDef
# calls that make a function a training step, not an evaluation
TRAINING_ATTRS = frozenset({"backward", "step", "zero_grad"})


def _trains(fn: ast.AST) -> bool:
    return any(isinstance(n.func, ast.Attribute) and n.func.attr in TRAINING_ATTRS
               for n in of_types(fn, (ast.Call,)))  # type: ignore[attr-defined]


def _mode_switch(n: ast.AST, ctx: Context, where: ast.AST) -> bool:
    """``x.eval()``, or ``x.train(...)`` given anything but a literal True (``train(False)``,
    ``train(mode=is_training)``), not a method of the file by that name: the code chooses
    modes itself."""
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)) \
            or n.func.attr not in ("eval", "train") or resolve(ctx, where, n) is not None \
            or ctx.analysis.callee(n, where) is not None:
        return False
    if n.func.attr == "eval":
        return not n.args and not n.keywords
    args = [*n.args, *(k.value for k in n.keywords)]
    return n.func.attr == "train" and bool(args) and not (
        len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value is True)


def _sets_eval(ctx: Context, fn: Def) -> bool:
    """``fn`` or a function it calls puts something in eval mode (``x.eval()``,
    ``x.train(False)``): the evaluation takes care of modes. A method of the file it calls
    counts whatever it switches, even entries of a registry that no name reaches (Dassl's
    ``self.set_model_mode('eval')``: ``self._models[name].eval()`` over the models that
    ``register_model`` stored)."""
    if any(_mode_switch(n, ctx, fn) for n in bfs_walk(fn)) or any(
            "eval" in ms for ms in function_effects(ctx, fn, 0).values()):
        return True
    for n in scope_nodes(fn):
        if not isinstance(n, ast.Call):
            continue
        target = ctx.analysis.callee(n, fn) or (resolve(ctx, fn, n) or (None,))[0]
        if target is not None and target is not fn and any(
                _mode_switch(m, ctx, target) and m.func.attr == "eval"  # type: ignore
                for m in bfs_walk(target)):
            return True
    return False


def _eval_before(ctx: Context, call: ast.Call, where: ast.AST, fn: Def) -> bool:
    """Something is put in eval mode in ``where`` (anywhere in a function: its callers and
    loops do not settle the order), directly or by a function of the file it calls. Module
    code runs once, top to bottom: there a switch after the call counts only when a loop
    holds both."""
    later = _runs_later(where, call) if where is ctx.tree else None
    for n in scope_nodes(where):
        if not isinstance(n, ast.Call) or n is call or later is not None and later(n):
            continue
        if _mode_switch(n, ctx, where) or any(
                "eval" in ms for ms in effects(ctx, where, n).values()):
            return True
        target = ctx.analysis.callee(n, where) or (resolve(ctx, where, n) or (None,))[0]
        if target is not None and target is not fn and target is not where and any(
                _mode_switch(m, ctx, target) for m in bfs_walk(target)):
            return True
    return False


def _runs_later(tree: ast.AST, call: ast.Call) -> Callable[[ast.AST], bool]:
    """A test: a node comes after ``call`` in module code and no loop holds both."""
    loops = [(x.lineno, x.end_lineno or x.lineno) for x in scope_nodes(tree)
             if isinstance(x, (ast.For, ast.AsyncFor, ast.While))]

    def later(n: ast.AST) -> bool:
        line = getattr(n, "lineno", 0)
        return line > call.lineno and not any(
            a <= line <= b and a <= call.lineno <= b for a, b in loops)
    return later


def _eval_up(ctx: Context, fn: Def, depth: int) -> bool:
    """A caller of ``fn``, or a caller of a caller (three levels up), switches modes; or, for
    a method, a call ``m.<method>(...)`` on a receiver the analysis cannot type follows
    ``m.eval()`` in its function (SSSD's ``evaluate(model, loader)``: ``model.eval()``, then
    ``model.evaluate(batch)``): that receiver is a module put in eval mode."""
    for c, w in calls_of(ctx, fn):
        if _eval_before(ctx, c, w, fn):
            return True
        if depth < 3 and isinstance(w, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and w is not fn and _eval_up(ctx, w, depth + 1):
            return True
    return depth < 3 and _eval_on_receiver(ctx, fn)


def _eval_on_receiver(ctx: Context, fn: Def) -> bool:
    a = ctx.analysis
    if not any(fn in c.methods.values() for c in a.classes.values()):
        return False
    for where in function_scopes(ctx.tree):
        calls = [n for n in scope_nodes(where) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute)]
        for n in calls:
            recv = dotted(n.func.value)  # type: ignore[attr-defined]
            if n.func.attr != fn.name or recv is None or recv == "self" \
                    or a.callee(n, where) is not None or resolve(ctx, where, n) is not None:
                continue
            if any(m.lineno <= n.lineno and dotted(m.func.value) == recv  # type: ignore
                   and _mode_switch(m, ctx, where) for m in calls):
                return True
    return False


def _runs_mode_model(ctx: Context, call: ast.Call, where: ast.AST, depth: int = 0
                     ) -> Kind | None:
    """The model with train/eval-dependent layers that ``call`` runs: a module call, or a
    function of the file (two calls down) that makes one."""
    k = called_kind(call.func, where, ctx)
    if k is not None and k.what == MODULE:
        return k if _kind_has_mode_layers(ctx, k) and not _forward_sets_mode(ctx, k) else None
    if depth >= 2:
        return None
    target = resolve(ctx, where, call)
    fn = target[0] if target is not None else None
    if fn is None or _trains(fn):
        return None
    for n in scope_nodes(fn):
        if isinstance(n, ast.Call):
            got = _runs_mode_model(ctx, n, fn, depth + 1)
            if got is not None:
                return got
    return None


def _forward_sets_mode(ctx: Context, k: Kind) -> bool:
    """The ``forward`` of the file's class ``k`` switches modes itself
    (``self.generator.eval()`` before running it): the module chooses the mode it runs in."""
    info = ctx.analysis.classes.get(k.cls or "")
    fwd = info.methods.get("forward") if info is not None else None
    return fwd is not None and any(_mode_switch(n, ctx, fwd) for n in bfs_walk(fwd))


class EvaluationInTrainMode(Rule):
    """An evaluation function runs a model that has dropout or batch norm under
    `torch.no_grad()` (its own block or decorator, or the caller's block around the call)
    without putting it in eval mode, and neither it nor its callers call `.eval()` first,
    while the file trains.

    Why: `no_grad` only stops recording the graph; train/eval mode is separate state. In train
    mode dropout still drops activations and batch norm normalises with the evaluation batch's
    own statistics and moves its running statistics toward the evaluation data, so the
    reported metrics are noisy and the next training steps start from statistics of data they
    never trained on (3D U-Net `UNet3DTrainer.validate`, VAAL `Solver.test`; checked on torch
    2.13). Call `model.eval()` before the evaluation loop, and `model.train()` after it.
    Known limits: the evaluation must be a function of this file that loops, makes no
    backward or optimizer step, and is called from this file; the model's class or
    constructor must show a dropout or batch-norm layer (or be a torchvision/timm model). A
    method called as `m.<method>(...)` on a receiver of unknown type after `m.eval()` counts
    as called in eval mode, and a module of the file whose `forward` switches modes itself
    (`self.generator.eval()`) chooses its own. A module a plain class takes through its
    constructor (`self.net = net`) and runs under `no_grad` in a method is reported at that
    store when every construction site of the file passes such a module and no statement of
    the file switches any module's mode (NOTE [evaluated where it was carried]).
    """

    code = "GT540"
    needs_step = True  # NOTE [step files]
    name = "evaluation-in-train-mode"
    message = ("`{call}` runs `{model}` under `{mode}` in `{fn}`, an evaluation that never "
               "puts it in eval mode (nor do its callers): dropout and batch norm act as in "
               "training and the running statistics move toward the evaluation data; call "
               "`.eval()` before the evaluation and `.train()` after it")
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)

            def score(batches):
                hits = 0
                for x, y in batches:
                    with torch.no_grad():
                        hits += (net(x).argmax(1) == y).sum().item()
                return hits

            for x, y in data:
                opt.zero_grad()
                nn.functional.cross_entropy(net(x), y).backward()
                opt.step()
            print(score(val))
            """, at=(11, 21)),
        Good("""
            import torch
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)

            def score(batches):
                hits = 0
                for x, y in batches:
                    with torch.no_grad():
                        hits += (net(x).argmax(1) == y).sum().item()
                return hits

            for x, y in data:
                opt.zero_grad()
                nn.functional.cross_entropy(net(x), y).backward()
                opt.step()
            net.eval()
            print(score(val))
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        mode = next((i.context_expr for i in node.items if disables_grad(i.context_expr, ctx)),
                    None)
        if mode is None:
            return
        if ctx.function is not None:
            yield from self._check(node.body, ctx.function, mode, ctx)
        where = ctx.function or ctx.tree
        seen: set[int] = set()
        for n in off_nodes(node.body, ctx):
            # `with torch.no_grad(): acc = test(model, loader)`: the whole of `test` runs
            # with grad off, so it is the evaluation when it loops (its own decorators aside)
            fn = ctx.analysis.callee(n, where) if isinstance(n, ast.Call) else None
            if fn is not None and fn is not ctx.function and id(fn) not in seen \
                    and not fn.decorator_list:
                seen.add(id(fn))
                yield from self._check(fn.body, fn, mode, ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        mode = next((d for d in node.decorator_list if disables_grad(d, ctx)), None)
        if mode is not None:
            yield from self._check(node.body, node, mode, ctx)

    def _check(self, body: list[ast.stmt], fn: Def, mode: ast.expr, ctx: Context
               ) -> Iterator[Finding]:
        if not ctx.mentions("backward") or not _file_trains(ctx) or _trains(fn) or not \
                of_types(fn, (ast.For, ast.AsyncFor, ast.comprehension)):
            return
        if _sets_eval(ctx, fn):
            return
        for n in off_nodes(body, ctx):
            if not isinstance(n, ast.Call):
                continue
            k = _runs_mode_model(ctx, n, fn)
            if k is None:  # NOTE [evaluated where it was carried]
                got = carried_finding(self, ctx, n, fn, mode, lambda k: has_mode_layers(
                    ctx, k, _kind_has_mode_layers) and not _forward_sets_mode(ctx, k),
                    _mode_switch)
                if got is not None:
                    yield got
                    return
                continue
            sites = calls_of(ctx, fn)
            if not sites or _eval_up(ctx, fn, 0):
                return
            said: set[int] = ctx.memo("gt540-said", ctx.tree, set)
            if id(n) in said:  # the same evaluation reached through another grad-off block
                return
            said.add(id(n))
            c, w = sites[0]
            yield self.report(n, ctx, related=(Related(
                ctx.path, c.lineno, f"`{fn.name}` is called here, with no `.eval()` before",
                ctx.column(c)),), call=ctx.source(n), model=_name(ctx, n, k, fn),
                mode=ctx.source(mode), fn=fn.name)
            return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
    visit_AsyncWith = visit_With  # type: ignore[assignment]


def _name(ctx: Context, call: ast.Call, k: Kind, fn: Def) -> str:
    f = call.func
    got = called_kind(f, fn, ctx) if isinstance(
        f, (ast.Name, ast.Attribute)) else None
    if got is not None and got.what == MODULE:
        return ctx.source(f)
    return k.cls.rpartition(".")[2] if k.cls else "the model"


def _file_trains(ctx: Context) -> bool:
    """The file's code (comments and strings aside) calls ``.backward(`` and ``.step(``."""
    code = ctx.code
    return ".backward(" in code and ".step(" in code
