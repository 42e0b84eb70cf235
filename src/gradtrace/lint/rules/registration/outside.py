"""GT438-GT439: a module that is trained is not the one the optimizer holds: a fresh module run
in the training loop but given to no optimizer, or a training function handed its modules in
swapped order."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.appended import appended_blocks
from gradtrace.lint.analysis.calls import calls_of
from gradtrace.lint.analysis.maximized import maximized
from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.project_files import imported_mentioning
from gradtrace.lint.analysis.objects import constructor_call, field_source
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import node_mentions
from gradtrace.lint.rules.registration._factory import factory_built
from gradtrace.lint.rules.registration._method_runs import method_run, moved_build
from gradtrace.lint.rules.registration._target_run import target_run, told
from gradtrace.lint.rules.registration._handed import handed_training, measured
from gradtrace.lint.rules.registration._on_self import kept_on_self
from gradtrace.lint.rules.registration._modules import (
    covers, module_ctor, optimizer_builds, owns_params, step_lines,
)

# what a class's own code does that says its parameters are not meant to train here
KEEPS_FIXED = ("requires_grad", "load_state_dict", "torch.load", "from_pretrained", "eval(")
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _surely_owns_params(call: ast.Call, ctx: Context, depth: int = 0) -> bool:
    """A module built by ``call`` visibly has parameters: an ``nn`` layer that owns some, or
    a class of the file (or a file base of it) that stores such a layer or an
    ``nn.Parameter`` on ``self``. A class of another library's base (a loss) does not count."""
    from gradtrace.lint.rules.leaf._tensors import is_parameter_call
    f = call.func
    if not isinstance(f, ast.Name) or f.id not in ctx.analysis.classes:
        return owns_params(call, ctx)
    cls = ctx.analysis.classes[f.id]
    if depth > 8 or not cls.is_module:
        return False
    for b in cls.node.bases:
        if isinstance(b, ast.Name) and b.id in ctx.analysis.classes and _surely_owns_params(
                ast.Call(func=b, args=[], keywords=[]), ctx, depth + 1):
            return True
    init = cls.methods.get("__init__")
    for info in cls.attrs.values():
        v = info.value
        if not isinstance(v, ast.Call):
            continue
        if is_parameter_call(v, ctx) or (
                module_ctor(v, ctx) and _surely_owns_params(v, ctx, depth + 1)):
            return True
        if init is not None and not v.args and not v.keywords and module_ctor(v, ctx) \
                and ctx.call_name(v) in ("torch.nn.ModuleList", "torch.nn.Sequential") \
                and any(isinstance(a, ast.Call) and module_ctor(a, ctx) and _surely_owns_params(
                    a, ctx, depth + 1) for a in appended_blocks(v, ctx, init)):
            return True  # `self.convs = ModuleList()` filled by `append(GCNConv(...))`
    return False


def _class_keeps_fixed(call: ast.Call, ctx: Context) -> bool:
    """A module class of the file that freezes, loads or evaluates itself."""
    f = call.func
    if not isinstance(f, ast.Name):
        return False
    cls = ctx.analysis.classes.get(f.id)
    return cls is not None and node_mentions(ctx, cls.node, *KEEPS_FIXED)


# what, done to a module, says it is handled on purpose (handed over, loaded, frozen, stored)
HANDLED = frozenset({"parameters", "named_parameters", "state_dict", "load_state_dict",
                     "eval", "requires_grad_", "apply", "register_forward_hook", "modules",
                     "children", "named_modules", "named_children", "zero_grad"})


def _meant_to_train(call: ast.Call, name: str) -> bool:
    """``name.requires_grad_()`` / ``requires_grad_(True)`` (unfrozen on purpose) or
    ``name.zero_grad()`` (its gradients are cleared for the step): the module is meant to
    train, nothing else handles it."""
    f = call.func
    if not isinstance(f, ast.Attribute) or dotted(f.value) != name:
        return False
    args = [*call.args, *(k.value for k in call.keywords)]
    if f.attr == "zero_grad":
        return True
    return f.attr == "requires_grad_" and (not args or len(args) == 1 and isinstance(
        args[0], ast.Constant) and args[0].value is True)


class _OnlyCalls:
    """The walk of :func:`_only_called` (an object, not a recursive closure: NOTE [gc])."""

    def __init__(self, scope: Scope, name: str, handoffs: list[ast.Call] | None,
                 handled: frozenset[str] | set[str]) -> None:
        self.scope, self.name, self.handoffs, self.handled = scope, name, handoffs, handled
        self.an = scope.ctx.analysis
        self.calls: list[ast.Call] = []
        self.skip: set[int] = set()

    def visit(self, n: ast.AST) -> bool:
        scope, name, handoffs, handled, an = (self.scope, self.name, self.handoffs,
                                              self.handled, self.an)
        calls, skip, visit = self.calls, self.skip, self.visit
        if id(n) in skip:
            return True
        if isinstance(n, ast.Name) and n.id == name:
            return False  # bare use (an argument, returned, stored...)
        if isinstance(n, ast.Call) and (isinstance(n.func, ast.Name) and n.func.id == name
                                        or method_run(n, name, scope)):
            calls.append(n)
            return all(visit(a) for a in [*n.args, *(k.value for k in n.keywords)])
        if isinstance(n, ast.Call) and _meant_to_train(n, name):
            return True
        if handoffs is not None and isinstance(n, ast.Call) and any(
                isinstance(a, ast.Name) and a.id == name
                for a in [*n.args, *(k.value for k in n.keywords)]) \
                and isinstance(n.func, ast.Name) and (n.func.id in an.functions or n.func.id
                                                      in scope.ctx.imports.aliases
                                                      or n.func.id in scope.ctx.imports.package):
            handoffs.append(n)
            return all(visit(a) for a in [*n.args, *(k.value for k in n.keywords)]
                       if not (isinstance(a, ast.Name) and a.id == name))
        if isinstance(n, ast.Attribute) and (dotted(n) or "").partition(".")[0] == name:
            parts = (dotted(n) or "").split(".")[1:]
            return not (set(parts) & handled) and isinstance(n.ctx, ast.Load)
        skip.update(id(c) for c in measured(n, name))
        return all(visit(c) for c in child_nodes(n))


def _only_called(scope: Scope, name: str, bind: ast.stmt | None,
                 handoffs: list[ast.Call] | None = None, allow_eval: bool = False
                 ) -> list[ast.Call] | None:
    """The calls ``name(...)`` in the scope when every other read of ``name`` is an
    attribute read (``m.fc.weight``), a ``.to()``/``.train()``-style call on it or a
    comprehension measuring its parameters (None: it is handed to something, loaded, frozen,
    stored or its parameters are read). With ``handoffs``, a call handing ``name`` to a
    function of the file is collected there instead
    (NOTE [module handed to a training function]); ``allow_eval``: ``name.eval()`` too."""
    w = _OnlyCalls(scope, name, handoffs, HANDLED - {"eval"} if allow_eval else HANDLED)
    for s in scope.stmts:
        if s is bind or isinstance(s, DEFS):
            continue
        for field, value in ast.iter_fields(s):
            if field in ("body", "orelse", "finalbody", "handlers", "cases"):
                continue
            for v in (value if isinstance(value, list) else [value]):
                if isinstance(v, ast.AST) and not w.visit(v):
                    return None
    return w.calls


def _detached(call: ast.Call, scope: Scope) -> bool:
    """``m(x).detach()`` (a target made without a graph): the module gets no gradient."""
    stmt = scope.statement_of(call)
    return stmt is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("detach", "detach_", "item", "tolist") and n.func.value is call
        for n in walk(stmt))


def _maximized(call: ast.Call, scope: Scope, loop: ast.stmt) -> bool:
    """NOTE [maximized module output]: the loss climbs ``call``'s result."""
    stmt = scope.statement_of(call)
    return stmt is not None and maximized(call, stmt, loop)


class ModuleOutsideOptimizer(Rule):
    """A freshly built module with parameters runs in the training loop but is in no optimizer.

    Why: `loss_fn = MotLoss()` (a loss with its own `nn.Linear` classifier) or a second head
    built next to the model is run in every step, so its parameters get gradients, but the
    only optimizer is `Adam(model.parameters())`: they stay at their random initialisation
    forever, silently (verified on torch 2.13). Add them to the optimizer
    (`list(model.parameters()) + list(loss_fn.parameters())`), or freeze the module if it is
    meant to stay fixed. A module whose output is only the target the loss fits (a teacher, a
    DQN target network) is told to run under `torch.no_grad()` instead (NOTE [output only a target]).
    The module may also be handed to a function of the file that runs it: `train(model,
    predictor, optimizer)` calling it in its own backward-and-step loop with the optimizer it
    was given, or a `step_loss(model, x)` helper called in the caller's loop (two calls down;
    NOTE [module handed to a training function]); or kept on `self` by a trainer class, built in
    its `__init__` or handed to its constructor, and run in a method that backpropagates and
    steps the class's optimizer (NOTE [module kept on self]).
    Known limits: the module must be built and left out of the optimizer in one function
    (or script), and used only by calling it or handing it to such functions (a comprehension
    that only measures its parameters is allowed); a module class that freezes, loads or evaluates
    itself is taken as intended, and so is a module whose output the loss maximizes (a critic
    or discriminator the trained module climbs: NOTE [maximized module output]).
    """

    code = "GT438"
    gate_statements = "function"
    name = "module-outside-optimizer"
    message = ("`{opt}` holds only the parameters of {srcs}, but `{mod}` (built at line "
               "{line}) also runs in the training loop: its parameters get gradients and "
               "never change")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            model = Backbone()
            head = torch.nn.Linear(64, 10)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(head(model(x)), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """, at=(4, 0)),
        Bad("""
            import torch
            class Trainer:
                def __init__(self):
                    self.encoder = torch.nn.Linear(8, 8)
                    self.head = torch.nn.Linear(8, 2)
                    self.opt = torch.optim.SGD(self.head.parameters(), lr=0.1)
                def fit(self, loader):
                    for x, y in loader:
                        loss = torch.nn.functional.cross_entropy(self.head(self.encoder(x)), y)
                        self.opt.zero_grad()
                        loss.backward()
                        self.opt.step()
            """, at=(6, 8)),
        Good("""
            import torch
            model = Backbone()
            head = torch.nn.Linear(64, 10)
            params = list(model.parameters()) + list(head.parameters())
            optimizer = torch.optim.Adam(params, lr=1e-3)
            criterion = torch.nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(head(model(x)), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """),
        Good("""
            import torch
            class MaskedCE(torch.nn.CrossEntropyLoss):
                def forward(self, pred, label, mask):
                    return (super().forward(pred, label) * mask).mean()
            optimizer = torch.optim.Adam(net.parameters())
            loss = MaskedCE(reduction="none")
            for x, y, m in loader:
                optimizer.zero_grad()
                loss(net(x), y, m).backward()
                optimizer.step()
            """),
        Good("""
            import torch
            actor = Actor()
            critic = torch.nn.Linear(6, 1)
            actor_optim = torch.optim.Adam(actor.parameters(), lr=1e-3)
            for obs in loader:
                actor_loss = -critic(torch.cat([obs, actor(obs)], dim=1)).mean()
                actor_optim.zero_grad()
                actor_loss.backward()
                actor_optim.step()
            """),
    ]

    # `_scan` finds nothing in a file without `backward`: asked before the scope is built
    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if _backward_near(ctx):
            yield from self._scan(ctx.scope(node), ctx)
        if ctx.mentions("backward"):  # NOTE [module kept on self]
            yield from self._on_self(ctx)

    def _on_self(self, ctx: Context) -> Iterator[Finding]:
        for cls in ctx.analysis.classes.values():
            if not all(node_mentions(ctx, cls.node, w) for w in ("backward", ".step(")):
                continue
            for opt, srcs, ostmt, mod, mstmt, call, fn in kept_on_self(
                    ctx, cls, KEEPS_FIXED, _surely_owns_params, _class_keeps_fixed, HANDLED):
                yield told(self, target_run(call, ctx.scope(fn) if isinstance(
                    fn, ast.FunctionDef) else None, ctx), ostmt, ctx, related=[
                    Related(ctx.path, mstmt.lineno, f"`{mod}` is built here", ctx.column(mstmt)),
                    Related(ctx.path, call.lineno, f"`{mod}` runs here (as `{dotted(call.func)}` "
                            f"in `{getattr(fn, 'name', '?')}()`)", ctx.column(call))],
                    opt=opt, srcs=", ".join(f"`{s}`" for s in sorted(srcs)), mod=mod,
                    line=mstmt.lineno)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node_mentions(ctx, node, "optim") and _backward_near(ctx):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        opts = [o for o in optimizer_builds(scope) if o.sources]
        if not opts:
            return
        for name, bs in scope.bindings.items():
            if "." in name or len(bs) != 1 or not isinstance(bs[0].value, ast.Call):
                continue
            b = bs[0]
            v = moved_build(b.value)  # `Net().to(device)`
            # a constructor, or a factory of the project (NOTE [module built by a factory])
            built = (ctx, v) if module_ctor(v, ctx) else \
                factory_built(v, ctx, scope, b.line, KEEPS_FIXED)
            if built is None or not _surely_owns_params(built[1], built[0]) \
                    or _class_keeps_fixed(built[1], built[0]) or scope.loops_of(b.stmt) \
                    or any(covers(name, s) or covers(s, name) for o in opts for s in o.sources):
                continue
            handoffs: list[ast.Call] = []
            calls = _only_called(scope, name, b.stmt, handoffs)
            if calls is None:
                continue
            hit = None
            if handoffs:  # NOTE [module handed to a training function]
                got = handed_training(scope, name, handoffs, opts, _only_called,
                                      self._trained_call)
                if got is None or got[1] is None and not (calls := [*calls, *got[0]]):
                    continue
                hit = got[1]
            hit = hit or self._trained_call(scope, calls, opts)
            if hit is None:
                continue
            call, opt = hit[0], hit[1]
            srcs = ", ".join(f"`{s}`" for s in sorted(opt.sources))
            where = home(ctx, hit[2]) if len(hit) > 2 else ctx
            yield told(self, target_run(call, where.scope(hit[2]) if len(hit) > 2 else scope,
                                        ctx), opt.stmt, ctx, related=[
                Related(ctx.path, b.line, f"`{name}` is built here", ctx.column(b.stmt)),
                Related(where.path, call.lineno, f"`{name}` runs here" + (
                    f" (handed to `{hit[2].name}()`)" if len(hit) > 2 else ""),
                    where.column(call))],
                opt=opt.name, srcs=srcs, mod=name, line=b.line)

    @staticmethod
    def _trained_call(scope: Scope, calls: list[ast.Call], opts):  # type: ignore[no-untyped-def]
        """(call, optimizer): a call of the module in a loop, with grad on, whose loop also
        runs ``backward()`` and steps exactly one of ``opts``."""
        for c in calls:
            loops = scope.loops_of(c)
            if not loops or scope.grad_off_at(c) is not None or _detached(c, scope):
                continue
            loop = loops[-1]
            if _maximized(c, scope, loop):
                continue
            start, end = loop.lineno, loop.end_lineno or loop.lineno
            through = _object_steps(scope, loop)  # `loss_fct(y, logits)`: its `__call__`
            if not through and not any(  # runs backward() and steps the optimizer it was given
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "backward" for n in walk(loop)):
                continue
            stepped = [o for o in opts if o.name in through or any(
                start <= ln <= end for ln in step_lines(scope, o.name))]
            if len(stepped) == 1 and stepped[0].stmt.lineno < start:
                return c, stepped[0]
        return None


def _backward_near(ctx: Context) -> bool:
    """The file runs ``backward()``, or calls a function imported from another file of the
    project that does (the training function a script hands its modules to:
    NOTE [module handed to a training function]); the bytes only, nothing parsed."""
    if ctx.mentions("backward"):
        return True
    # an optimizer over some module's `parameters()` is built here first: most files that
    # name an optimizer build none, and the import lookup reads other files' bytes
    return ctx.mentions("parameters(") and ctx.memo(
        "gt438-backward", ctx.tree, lambda: imported_mentioning(ctx, ctx.code, (".backward(",)))


def _object_steps(scope: Scope, loop: ast.stmt) -> frozenset[str]:
    """Optimizers the caller gave an object of a class of the file (``LossCompute(crit,
    opt)``) whose method, called in ``loop``, runs ``backward()`` and ``self.<opt>.step()``
    (NOTE [fields])."""
    ctx = scope.ctx
    out: set[str] = set()
    for n in walk(loop):
        if not isinstance(n, ast.Call):
            continue
        recv, meth = (n.func, "__call__") if isinstance(n.func, ast.Name) else (
            (n.func.value, n.func.attr) if isinstance(n.func, ast.Attribute) else (None, ""))
        call = constructor_call(recv, scope, n.lineno) if isinstance(recv, ast.Name) else None
        cls = ctx.analysis.classes.get(call.func.id) if call is not None else None  # type: ignore
        fn = cls.methods.get(meth) if cls is not None else None
        if fn is None or not any(isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute)
                                 and x.func.attr == "backward" for x in walk(fn)):
            continue
        for x in walk(fn):
            if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) \
                    and x.func.attr == "step" and isinstance(x.func.value, ast.Attribute) \
                    and dotted(x.func.value.value) == "self":
                src = field_source(recv, x.func.value.attr, scope, n.lineno)
                if src is not None and dotted(src):
                    out.add(dotted(src))  # type: ignore[arg-type]
    return frozenset(out)


class TrainedModuleSwapped(Rule):
    """A training function is handed its modules in swapped order (`train(ema, model, ...)`).

    Why: `def train(netG, netG_ema, ..., opt_g)` called as `train(netG_ema, netG, ...)` trains
    the EMA copy, which the optimizer (built over `netG.parameters()`) does not hold: the
    optimizer steps parameters that never get a gradient and the real model never learns,
    silently. The call's argument names are the function's parameter names in swapped places.
    Known limits: the function must be of this file and the swapped arguments plain names;
    one of them must be a module that an optimizer of the caller is built over.
    """

    code = "GT439"
    gate_statements = True
    name = "trained-module-swapped"
    message = ("`{a}` and `{b}` are passed in each other's places: `{fn}()` takes `{b}` "
               "first; the module it trains is not the one `{opt}` holds")
    # an optimizer of the caller is a `torch.optim` class, named in the code: without one
    # nothing can be swapped, and most library files build none (NOTE [word gates])
    triggers = ("optim",)
    examples = [
        Bad("""
            import copy, torch
            def train(net, net_ema, opt):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(net(x), y).backward()
                    opt.step()
            net = Net()
            net_ema = copy.deepcopy(net)
            opt = torch.optim.Adam(net.parameters())
            train(net_ema, net, opt)
            """, at=(10, 0)),
        Good("""
            import copy, torch
            def train(net, net_ema, opt):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(net(x), y).backward()
                    opt.step()
            net = Net()
            net_ema = copy.deepcopy(net)
            opt = torch.optim.Adam(net.parameters())
            train(net, net_ema, opt)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        names = [n for n, f in ctx.analysis.functions.items()
                 if len(f.args.posonlyargs) + len(f.args.args) >= 2]
        for call, _, fn in calls_of(ctx, names):  # NOTE [call sites]
            yield from self._check(call, fn or ctx.tree, ctx)

    def _check(self, node: ast.Call, where: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.func, ast.Name) or len(node.args) < 2 \
                or not all(isinstance(a, ast.Name) for a in node.args[:2]):
            return
        fn = ctx.analysis.functions.get(node.func.id)
        if fn is None:
            return
        params = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)]
        args = [a.id if isinstance(a, ast.Name) else None for a in node.args]
        n = min(len(args), len(params))
        swapped = [(i, j) for i in range(n) for j in range(i + 1, n)
                   if args[i] is not None and args[j] is not None and args[i] != args[j]
                   and args[i] == params[j] and args[j] == params[i]]
        if not swapped:  # the pure-syntax test first: the scope costs a data-flow pass
            return
        scope = ctx.scope(where)
        stmt = scope.statement_of(node)
        if stmt is None:
            return
        for i, j in swapped:
            a, b = args[i], args[j]
            opt = next((o for o in optimizer_builds(scope) if o.stmt.lineno < stmt.lineno
                        and any(covers(s, a) or covers(s, b) for s in o.sources)), None)
            if opt is not None:
                yield self.report(stmt, ctx, related=[Related(
                    ctx.path, fn.lineno, f"`{fn.name}` takes `{params[i]}` first",
                    ctx.column(fn))], a=a, b=b, fn=fn.name, opt=opt.name)
                return
