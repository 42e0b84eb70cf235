"""GT435-GT437: the optimizer is wired to the wrong thing: built anew on every call, given the
same parameters twice, or a different optimizer is stepped than the one the loss belongs to.

Which parameters an optimizer call holds is :func:`gradtrace.lint.analysis.params.param_sources_of`.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.params import PARAM_ITERS, param_sources_of
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import says_all
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call, keyword
from gradtrace.lint.rules.registration._modules import covers
from gradtrace.lint.rules.registration._per_call import _called_in_loop

# optimizers that keep per-parameter state between steps (moments, step counts, history)
STATEFUL = frozenset({"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta",
                      "RMSprop", "LBFGS", "SparseAdam", "Rprop"})


def _params_arg(call: ast.Call) -> ast.AST | None:
    return call.args[0] if call.args else keyword(call, "params")


class ParametersListedTwice(Rule):
    """The optimizer is given the same module's parameters twice (a copy-paste slip).

    Why: `list(d1.parameters()) + list(d1.parameters())` was meant to list two modules; the
    other one (`d2`) is in no optimizer and never trains. PyTorch only warns about duplicate
    parameters in one group (and raises `ValueError: some parameters appear in more than one
    parameter group` across groups, also when a module and its submodule are both listed).
    List each module once, or exclude the submodule from the other group.
    Known limits: the list must be spelled out in the optimizer call or in a name bound once
    just before it (a `filter`/comprehension is not followed).
    """

    code = "GT435"
    gate_statements = True
    name = "parameters-listed-twice"
    message = ("`{again}.parameters()` is given to the optimizer a second time (`{first}` at "
               "line {line} already holds them){what}")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            params = list(model.mpd.parameters()) + list(
                model.mpd.parameters())
            opt = torch.optim.AdamW(params, lr=1e-3)
            """, at=(3, 4)),
        Bad("""
            import torch
            opt = torch.optim.SGD([{"params": model.parameters()},
                                   {"params": model.fc.parameters(), "lr": 0.1}], lr=0.01)
            """, at=(3, 34)),
        Good("""
            import torch
            params = list(model.mpd.parameters()) + list(model.mrd.parameters())
            opt = torch.optim.AdamW(params, lr=1e-3)
            ignored = list(map(id, model.fc.parameters()))
            base = filter(lambda p: id(p) not in ignored, model.parameters())
            opt2 = torch.optim.SGD([{"params": base}, {"params": model.fc.parameters()}])
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_optimizer_call(node, ctx):
            return
        arg = _params_arg(node)
        if arg is None:
            return
        srcs = param_sources_of(arg, ctx.scope(), node.lineno)
        if not srcs or len(srcs) < 2:
            return
        for i, (name, n) in enumerate(srcs):
            for first, m in srcs[:i]:
                if covers(first, name) or covers(name, first):
                    what = ": PyTorch raises when a parameter is in two groups" \
                        if _group(ctx.tree, n) is not _group(ctx.tree, m) else \
                        (": in one group PyTorch only warns and every step updates them twice")
                    if first == name:
                        what = ": an intended module is missing and never trains"
                    yield self.report(n, ctx, related=[Related(
                        ctx.path, m.lineno, "listed here first", ctx.column(m))],  # type: ignore[attr-defined]
                        again=name, first=first, line=m.lineno, what=what)  # type: ignore[attr-defined]
                    return


def _group(arg: ast.AST, node: ast.AST) -> ast.AST | None:
    """The ``{"params": ...}`` dict in ``arg`` that holds ``node`` (None: a list of parameters,
    one group; asked only when reporting)."""
    for d in walk(arg):
        if isinstance(d, ast.Dict) and any(node is x for k, v in zip(d.keys, d.values)
                                           if isinstance(k, ast.Constant) and k.value == "params"
                                           for x in walk(v)):
            return d
    return None


def _local_sources(call: ast.Call, scope: Scope) -> list[str]:
    """Dotted names whose parameters (``x.parameters()``) or which themselves (``{'params':
    self.emb}``) an optimizer call is given (through a name bound once before it)."""
    out = []
    arg = _params_arg(call)
    if isinstance(arg, ast.Name):
        bs = scope.bindings.get(arg.id, ())
        arg = bs[0].value if len(bs) == 1 and bs[0].line < call.lineno else None
    for n in walk(arg) if arg is not None else ():
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in PARAM_ITERS:
            d = dotted(n.func.value)
            if d:
                out.append(d)
        elif isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values):
                if isinstance(k, ast.Constant) and k.value == "params" and dotted(v):
                    out.append(dotted(v) or "")
    return out


class OptimizerRecreatedPerCall(Rule):
    """A stateful optimizer (Adam, RMSprop...) is built inside a function that a loop calls.

    Why: `opt = torch.optim.Adam(model.parameters())` inside `train_epoch()` (or a per-frame
    method) makes a fresh optimizer each call: Adam's moment estimates and step count restart
    every epoch, so the bias correction re-warms and momentum is lost (verified on torch 2.13:
    the state holds only the steps of the last call). Build the optimizer once, outside the
    loop, and pass it in.
    Known limits: the function must be of this file and called in a loop with the same model
    (or object) each time; an optimizer over tensors made inside the function (a fresh
    per-sample problem), over a module the function builds first (`self.gen = Generator()`:
    a new model each call) or built lazily under an `if` is taken as intended.
    """

    code = "GT436"
    gate_statements = "function"
    name = "optimizer-recreated-per-call"
    message = ("`{opt}` is built anew every time `{fn}()` runs, and `{fn}()` is called in a "
               "loop (line {line}): its state (moments, step count) restarts at every call; "
               "build it once outside the loop and pass it in")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            def train_epoch(model, tasks, lr=1e-3):
                opt = torch.optim.Adam(model.parameters(), lr=lr)
                for x, y in tasks:
                    opt.zero_grad()
                    model.loss(x, y).backward()
                    opt.step()
            model = Net()
            for epoch in range(10):
                train_epoch(model, tasks)
            """, at=(3, 4)),
        Good("""
            import torch
            def fit(model, tasks, lr=1e-3):
                opt = torch.optim.Adam(model.parameters(), lr=lr)
                for x, y in tasks:
                    opt.zero_grad()
                    model.loss(x, y).backward()
                    opt.step()
            for fold in range(5):
                model = Net()
                fit(model, folds[fold])
            """),
        Good("""
            import torch
            def invert(gen, target):
                z = torch.zeros(1, 128, requires_grad=True)
                opt = torch.optim.Adam([z], lr=0.1)
                for _ in range(100):
                    opt.zero_grad()
                    (gen(z) - target).pow(2).mean().backward()
                    opt.step()
                return z
            for img in images:
                invert(gen, img)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node.name == "__init__" or not says_all(ctx, node, ("step",)):
            return  # (the optimizer must be stepped in the function: NOTE [word gates])
        scope = ctx.scope(node)
        for s in scope.stmts:
            if not isinstance(s, ast.Assign) or len(s.targets) != 1 \
                    or not isinstance(s.value, ast.Call) or not is_optimizer_call(s.value, ctx):
                continue
            q = ctx.call_name(s.value) or ""
            if q.rpartition(".")[2] not in STATEFUL or id(s) in scope.branches \
                    or scope.loops_of(s):
                continue
            name = dotted(s.targets[0])
            if name is None or name.startswith("self.") or not _stepped_in(scope, name) \
                    or _returned(scope, name):
                continue
            roots = self._persistent_roots(s.value, node, scope)
            if not roots:
                continue
            call = _called_in_loop(ctx, node, roots, _local_sources(s.value, scope))
            if call is not None:
                yield self.report(s, ctx, related=[Related(
                    ctx.path, call.lineno, f"`{node.name}()` is called in a loop here",
                    ctx.column(call))], opt=ctx.source(s.value.func), fn=node.name,
                    line=call.lineno)

    @staticmethod
    def _persistent_roots(call: ast.Call, fn: ast.FunctionDef, scope: Scope) -> set[str] | None:
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        roots = set()
        for src in _local_sources(call, scope):
            root = src.partition(".")[0]
            if root == "self" and _built_here(".".join(src.split(".")[:2]), call, scope):
                return None  # `self.gen = Generator()` first: a new model per call
            if root == "self" or (root in params and not scope.bindings.get(root)):
                roots.add(root)
            else:
                return None  # made here (or unknown): a fresh problem per call
        return roots


def _built_here(attr: str, call: ast.Call, scope: Scope) -> bool:
    """``self.<attr>`` is first bound in the function, before ``call``, to a call other than
    one of its own methods (``self.gen = Generator(...)``, not ``self.gen = self.gen.cuda()``)."""
    bs = [b for b in scope.bindings.get(attr, ()) if b.line < call.lineno]
    v = bs[0].value if bs else None
    return isinstance(v, ast.Call) and not (dotted(v.func) or "").startswith(attr + ".")


def _stepped_in(scope: Scope, name: str) -> bool:
    return any(m.receiver == name for m in scope.calls_to("step"))


def _returned(scope: Scope, name: str) -> bool:
    for s in scope.stmts:
        if isinstance(s, ast.Return) and s.value is not None and any(
                isinstance(n, ast.Name) and n.id == name for n in (
                    s.value.elts if isinstance(s.value, ast.Tuple) else [s.value])):
            return True  # the caller keeps the optimizer
    return False


def _receiver_key(e: ast.AST) -> str:
    return ast.dump(e)


def _optimizer_expr(e: ast.AST, scope: Scope, ctx: Context) -> bool:
    """Whether ``e`` is an optimizer: a name/attribute of that kind, or an entry of a dict
    literal of optimizers (``self.optimizer["generator"]``)."""
    from gradtrace.lint.analysis.kinds import OPTIMIZER
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
        d = _dict_literal(e.value, scope, ctx)
        if d is not None:
            for k, v in zip(d.keys, d.values):
                if isinstance(k, ast.Constant) and k.value == e.slice.value:
                    return is_optimizer_call(v, ctx)
        return False
    k = ctx.analysis.kind(e, scope, getattr(e, "lineno", 0))
    return k is not None and k.what == OPTIMIZER


def _dict_literal(e: ast.AST, scope: Scope, ctx: Context) -> ast.Dict | None:
    name = dotted(e)
    if name is None:
        return None
    if name.startswith("self.") and name.count(".") == 1:
        cls = ctx.analysis.class_of(scope.node)
        info = cls.attrs.get(name[5:]) if cls is not None else None
        v = info.value if info is not None and not info.later else None
    else:
        b = scope.binding_before(name, 10**9)
        v = b.value if b is not None and len(scope.bindings.get(name, ())) == 1 else None
    return v if isinstance(v, ast.Dict) else None


def _stepped_anywhere(ctx: Context) -> set[str]:
    """ast dumps of every receiver of ``.step(...)`` in the file, and of optimizers handed to
    a call (``scaler.step(opt)``, ``train(opt)``)."""
    def make() -> set[str]:
        out = set()
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "step":
                    out.add(_receiver_key(n.func.value))
                for a in [*n.args, *(k.value for k in n.keywords)]:
                    out.add(_receiver_key(a))
        return out
    return ctx.memo("gt427-stepped", ctx.tree, make)


STEP_WORDS = ("zero_grad", "backward", "step")  # the three calls GT437 looks for


class StepOnOtherOptimizer(Rule):
    """After one optimizer's `zero_grad()` and a `backward()`, another optimizer is stepped.

    Why: `opt_g.zero_grad(); g_loss.backward(); opt_d.step()` steps the discriminator with the
    generator's loss while the generator's optimizer is never stepped: the generator never
    trains and the discriminator takes a wrong update (PyTorch raises nothing). Step the
    optimizer that was zeroed for this loss.
    Optimizers cleared together before the backward are all read: `opt1.zero_grad();
    opt2.zero_grad(); loss.backward(); opt2.step()`, with `opt1` stepped nowhere, leaves the
    model the loss was meant to train unchanged (a pretrained net2 trained instead of net1).
    Known limits: the three calls must be in one function, in order; the zeroed optimizer must
    never be stepped (nor handed to a call) anywhere in the file.
    """

    code = "GT437"
    gate_statements = "function"
    name = "step-on-other-optimizer"
    message = ("`{other}.step()` follows `{zeroed}.zero_grad()` and the backward at line "
               "{line}, and `{zeroed}` is never stepped: this loss updates the wrong "
               "parameters")
    triggers = ("step",)
    examples = [
        Bad("""
            import torch
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for x in loader:
                opt_g.zero_grad()
                (-D(G(z)).mean()).backward()
                opt_d.step()
                opt_d.zero_grad()
                d_loss(D, x, G(z).detach()).backward()
                opt_d.step()
            """, at=(7, 4)),
        Good("""
            import torch
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for x in loader:
                opt_g.zero_grad()
                (-D(G(z)).mean()).backward()
                opt_g.step()
                opt_d.zero_grad()
                d_loss(D, x, G(z).detach()).backward()
                opt_d.step()
            """),
        Bad("""
            import torch
            opt_enc = torch.optim.SGD(enc.parameters(), lr=0.1)
            opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
            for x, y in loader:
                opt_enc.zero_grad()
                opt_head.zero_grad()
                criterion(head(enc(x)), y).backward()
                opt_head.step()
            """, at=(8, 4)),
        Good("""
            import torch
            opt_enc = torch.optim.SGD(enc.parameters(), lr=0.1)
            opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
            for x, y in loader:
                opt_enc.zero_grad()
                opt_head.zero_grad()
                criterion(head(enc(x)), y).backward()
                opt_head.step()
                opt_enc.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if says_all(ctx, node, STEP_WORDS):  # else no scope to build: it cannot match
            yield from self._scan(ctx.scope(node), ctx)

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if says_all(ctx, node, STEP_WORDS):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        zeroed: list[ast.AST] = []  # the optimizers cleared together before the backward
        backward: int | None = None
        stepped = None
        for s in scope.stmts:
            if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Call) \
                    or not isinstance(s.value.func, ast.Attribute):
                continue
            f = s.value.func
            if f.attr == "zero_grad":
                zeroed = [f.value] if backward is not None else [*zeroed, f.value]
                backward = None
            elif f.attr == "backward" and zeroed:
                backward = s.lineno
            elif f.attr == "step" and zeroed and backward is not None \
                    and not s.value.args:
                other = f.value
                for z in zeroed:
                    if _receiver_key(other) == _receiver_key(z):
                        continue
                    if stepped is None:
                        stepped = _stepped_anywhere(ctx)
                    if _receiver_key(z) not in stepped \
                            and _optimizer_expr(z, scope, ctx) \
                            and _optimizer_expr(other, scope, ctx):
                        yield self.report(s, ctx, related=[Related(
                            ctx.path, backward, "the loss is backpropagated here")],
                            other=ctx.source(other), zeroed=ctx.source(z),
                            line=backward)
                        break
                zeroed, backward = [], None
