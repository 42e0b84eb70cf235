"""GT404 and GT406: the optimizer does not hold the parameters that are trained."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.params import (
    builds_module, foreign_replacement, replaces_submodules_of)
from gradtrace.lint.analysis.project import foreign_class
from gradtrace.lint.analysis.reparametrized import reparametrized
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import Context
from gradtrace.lint.flow import MODULE, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import (
    is_optimizer_call, is_parameter_call, is_true, keyword, scope_mentions,
)
from gradtrace.lint.rules.registration.lazy_optim import new_leaf, stale_lazy_optimizer
from gradtrace.lint.rules.registration._aliases import (
    own_gradients, rebound_in, stepped_in_one_pass)
from gradtrace.lint.rules.registration._recreated import (_same_constructor, _stale_after_init,
                                                           all_builds, built_alike)
from gradtrace.lint.rules.registration._modules import (
    OptimizerBuild, _strip, module_ctor, optimizer_builds, step_lines, stale_across_methods,
)
from gradtrace.lint.rules.registration._optimizer_pairs import (
    _shared_part, _stepped_together, _whole_params, odd_branch, role,
)
from gradtrace.lint.rules.registration._rebuilt_model import (
    added_attribute, inside_name, rebuilds_argument,
    _base, _own_replacement, _same_module, _stale_optimizer, _taken_line,
)
from gradtrace.lint.nodes import statements


class ModelRecreatedAfterOptimizer(Rule):
    """The model (a submodule, a parameter) is replaced after the optimizer was built from it.

    Why: an optimizer holds the parameter *objects* it was given. `model = Net()`,
    `model = copy.deepcopy(model)`, `model.fc = nn.Linear(...)`, `layer.weight =
    nn.Parameter(...)`, `model.load_state_dict(sd, assign=True)` or `weight_norm(layer)` after
    `opt = SGD(model.parameters())` leave the optimizer updating the old tensors: the new
    ones get gradients but never change, silently (pytorch-facts.md#optimizer-identity). Default
    `load_state_dict` and `.to()` keep identity and are fine. Build the optimizer after the
    model is final (or `opt.add_param_group(...)` for a new head).
    A method of a class of the file that re-creates its own `self.<x>` Parameter or layer, called
    on a submodule after the optimizer was built (`model.quant.init_range(...)`), is reported
    on that assignment: copy into the existing parameter under `torch.no_grad()` instead.
    A method that builds a new layer into its own submodules (`new = nn.Embedding(...);
    self.transformer.wte = new`, `for blk in self.blocks: blk.adapters[name] = Adapter()`:
    `resize_token_embeddings`, `add_adapter`) is reported where it is called, also on the
    unwrapped model (`m.module if hasattr(m, "module") else m`): build the optimizer after it.
    A model made again by the same call as the object the optimizer was built over
    (`model = Net(cfg)` twice, `Net` from another file) is a new object whatever its class
    (NOTE [same constructor again]); so is `self.model = Net()` again in `__init__` after
    `self.opt` was built there, when another method steps `self.opt`.
    Known limits: the optimizer must be built and stepped in the same function (or built by a
    helper of the file, or stepped by one it is handed to); across the methods of a class, only
    an optimizer built once in `__init__` and a re-creation in `__init__` itself or in a method
    `__init__` never calls.
    """

    code = "GT404"
    # it reports only where the enclosing function mentions "optim" (scope_mentions)
    gate_statements = "function"
    name = "model-recreated-after-optimizer"
    message = ("`{target}` is replaced after the optimizer `{opt}` was built from its parameters "
               "(line {opt_line}): `{opt}.step()` keeps updating the old tensors")
    message_added = ("`{target}` is added after the optimizer `{opt}` was built (line "
                     "{opt_line}): `{opt}` does not hold it, so `{opt}.step()` never updates it")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            import torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            model.fc = torch.nn.Linear(512, 10)
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            """, at=(5, 0)),
        Bad("""
            import copy
            import torch
            def train(model, loader):
                opt = torch.optim.Adam(model.parameters())
                model = copy.deepcopy(model)
                for x, y in loader:
                    model(x).sum().backward()
                    opt.step()
            """, at=(5, 4)),
        Bad("""
            import torch
            from torch import nn
            model = nn.Linear(4, 2).to("cuda")
            optimizer = torch.optim.Adam(model.parameters())
            model = nn.Linear(4, 2).to("cuda").train()
            for x, y in loader:
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            """, at=(5, 0)),
        Bad("""
            import torch
            from models import Net
            model = Net(cfg).cuda()
            opt = torch.optim.Adam(model.parameters())
            model = Net(cfg).cuda()
            for x in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
            """, at=(5, 0)),
        Good("""
            import torch
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            model = model.to("cuda")
            model.load_state_dict(torch.load("ckpt.pt"))
            model = torch.nn.DataParallel(model)
            for x, y in loader:
                model(x).sum().backward()
                opt.step()
            """),
        Good("""
            import torch
            for fold in range(5):
                model = Net()
                opt = torch.optim.SGD(model.parameters(), lr=0.01)
                for x, y in loader:
                    model(x).sum().backward()
                    opt.step()
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not isinstance(node.value, ast.Call):
            return
        target = dotted(node.targets[0])
        if target is None or not _may_report(ctx) \
                or not self._new_object(node.value, target, ctx):
            return
        yield from self._report(node, target, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr == "load_state_dict" and is_true(keyword(call, "assign")):
            target = dotted(call.func.value)
            if target:
                yield from self._report(node, target, ctx)
        elif isinstance(call, ast.Call) and (target := reparametrized(call, ctx.scope())):
            yield from self._report(node, target, ctx)
        elif isinstance(call, ast.Call) and _may_report(ctx):  # NOTE [stale optimizer first]
            target = replaces_submodules_of(call, ctx.scope(), node.lineno)
            if target:
                yield from self._report(node, target, ctx, _own_replacement(call, target, ctx))

    def _new_object(self, value: ast.Call, target: str, ctx: Context,
                    scope: Scope | None = None) -> bool:
        """``value`` makes a new object for ``target`` (read in ``scope``: the function being
        visited by default, the method for ``visit_ClassDef``).

        # NOTE [module class of another file rebuilt]
        ``net = UNet(n_channels=3).to(device)`` with ``UNet`` an ``nn.Module`` subclass of
        another file of the project (the project index's class facts, ``foreign_class``) is
        a new module as much as a class of this file: the optimizer built before it over the
        old ``net`` (a parameter of the function) holds none of its weights."""
        scope = scope or ctx.scope()
        root = target.partition(".")[0]
        q = ctx.call_name(value) or ""
        if q == "copy.deepcopy":
            return True
        wrap = _strip(value)  # `DataParallel(model).cuda()`: moving keeps the parameters
        wrap = wrap if isinstance(wrap, ast.Call) else value
        if any(_base(a) in (root, target) for a in [*wrap.args, *(k.value for k in
                                                                  wrap.keywords)]):
            # a wrapper of the same model (DataParallel, compile, DDP), unless a function of
            # the file swaps its submodules for new ones (`model = convert(model)`)
            return replaces_submodules_of(wrap, scope, value.lineno) == target \
                or rebuilds_argument(wrap, target, scope, ctx)  # NOTE [argument built again]
        if "." in target and is_parameter_call(value, ctx):
            return True
        if module_ctor(_strip(value), ctx):
            return True
        inner = _strip(value)
        if isinstance(inner, ast.Call) and (c := foreign_class(ctx, inner.func)) is not None \
                and c.is_module:  # NOTE [module class of another file rebuilt]
            return True
        fn = called_function(inner, scope, value.lineno) \
            if isinstance(inner, ast.Call) else None
        if fn is not None and builds_module(fn, ctx):  # `model = build()`
            return True
        if _same_constructor(value, target, ctx):
            return True
        if q == "torch.load" and "." not in target:
            b = scope.binding_before(target, value.lineno)
            return b is not None and b.kind == MODULE
        return False

    def _report(self, node: ast.stmt, target: str, ctx: Context,
                inside: ast.stmt | None = None) -> Iterator[Finding]:
        if not _may_report(ctx):
            return
        got = next((g for t in _same_module(ctx.scope(), target, node.lineno)
                    if (g := _stale_optimizer(ctx.scope(), t, node)) is not None), None)
        if got is None and inside is None:
            got = _stale_after_init(ctx, node, target)
        if got is None:
            return
        opt, step = got
        # a builder's `return` stands for its caller's step (NOTE [stale optimizer handed back])
        handed = any(isinstance(r, ast.Return) and r.lineno == step for r in ctx.scope().stmts)
        related = [Related(ctx.path, opt.stmt.lineno, f"`{opt.name}` is built here",
                           ctx.column(opt.stmt)),
                   Related(ctx.path, step, f"`{opt.name}` is handed back here, still over the "
                           "old parameters: the caller's `step()` never updates the new ones"
                           if handed else f"`{opt.name}.step()` updates the old parameters")]
        opt_line = opt.stmt.lineno
        taken = _taken_line(ctx.scope(), opt) if opt_line > node.lineno else None
        if taken is not None:  # `params = list(model.parameters())` before the replacement
            related.insert(0, Related(ctx.path, taken, "the list of parameter objects it is "
                                      "built over is taken here, before the replacement"))
            opt_line = taken
        added = added_attribute(ctx, node, target, inside, ctx.scope())  # NOTE [added, not replaced]
        call = getattr(node, "value", None)
        far = foreign_replacement(call, ctx.scope()) if inside is None \
            and isinstance(call, ast.Call) else None
        if far is not None:  # a helper of another file swaps the submodule
            related.insert(0, Related(far[0], far[1].lineno, f"`{ctx.source(call.func)}` "
                                      f"replaces `{far[2]}` here, with a new module"))
            target = far[2]
        if inside is not None:  # a method re-creates its object's parameter: the root is there
            seen: set[int] = ctx.memo("gt404-inside", ctx.tree, set)
            if id(inside) in seen:
                return
            seen.add(id(inside))
            related.insert(0, Related(ctx.path, node.lineno, f"`{ctx.source(node.value)}` runs "
                                      "it here, after the optimizer was built",  # type: ignore
                                      ctx.column(node)))
            node = inside
        f = self.report(node, ctx, related=related, target=inside_name(target, inside),
                        opt=opt.name, opt_line=opt_line)
        yield f if added is None else replace(f, message=self.message_added.format(
            target=added, opt=opt.name, opt_line=opt_line))


    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        """``self.model = Net()`` in a method of a class whose ``__init__`` built
        ``self.opt`` over ``self.model``'s parameters, and no other method rebuilds it."""
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or "__init__" not in cls.methods \
                or not scope_mentions(ctx, "optim"):
            return
        for m in cls.methods.values():
            if m.name == "__init__":
                continue
            for st in statements(m):
                if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                        and isinstance(st.value, ast.Call):
                    target = dotted(st.targets[0]) or ""
                    if target.startswith("self.") \
                            and self._new_object(st.value, target, ctx, ctx.scope(m)) \
                            and ctx.call_name(st.value) != "copy.deepcopy":  # restoring a best copy
                        yield from self._across_methods(st, m, target, ctx)
                    elif target.startswith("self.") and built_alike(cls, st.value, target):
                        yield from self._across_methods(st, m, target, ctx, outside=True)
                    elif target.startswith("self.") and new_leaf(st.value, ctx):
                        yield from self._lazy(st, m, target, ctx)

    def _lazy(self, node: ast.Assign, fn: ast.AST, target: str, ctx: Context
              ) -> Iterator[Finding]:
        """``self.x = x.detach().to(...).requires_grad_()`` in a method the script runs between
        two runs of a method that built the optimizer over ``self.x`` once, lazily."""
        got = stale_lazy_optimizer(ctx, fn, target)
        if got is None:
            return
        build, changed, reused = got
        opt = dotted(build.targets[0]) or "optimizer"  # type: ignore[attr-defined]
        yield self.report(node, ctx, related=[Related(ctx.path, n.lineno, what, ctx.column(n))
                                              for n, what in (
            (build, f"`{opt}` is built here once, over `{target}`"),
            (changed, f"`{ctx.source(changed)}` re-creates it here"),
            (reused, f"`{ctx.source(reused)}` then steps the old tensor"))],
            target=target, opt=opt, opt_line=build.lineno)

    def _across_methods(self, node: ast.Assign, fn: ast.AST, target: str, ctx: Context,
                        outside: bool = False) -> Iterator[Finding]:
        got = stale_across_methods(ctx, fn, target, node.lineno, stepped_outside=outside)
        if got is None:
            return
        build, step = got
        related = [Related(ctx.path, build.stmt.lineno, f"`{build.name}` is built here, in "
                           "`__init__`", ctx.column(build.stmt))]
        if step is not build.stmt:
            related.append(Related(ctx.path, step.lineno, f"`{build.name}.step()` updates the "
                                   "old parameters", ctx.column(step)))
        yield self.report(node, ctx, related=related, target=target, opt=build.name,
                          opt_line=build.stmt.lineno)


def _may_report(ctx: Context) -> bool:
    """# NOTE [stale optimizer first]
    :meth:`ModelRecreatedAfterOptimizer._report` finds nothing in a scope (the function
    being visited, or the module) that builds no optimizer (:func:`._recreated.all_builds`),
    so the statement visitors ask that first, before what the statement re-creates: reading
    that (``replaces_submodules_of``, ``_new_object``) may resolve a callee in another file of
    the project (NOTE [project index]: a parse), and a package's ``__init__.py`` that imports
    ``.optimization`` calls dozens of things at module level."""
    return scope_mentions(ctx, "optim") and bool(all_builds(ctx.scope()))


class OptimizersShareParameters(Rule):
    """Two optimizers are given the same parameters, or each other's (GAN G/D swapped).

    Why: each optimizer steps every parameter it holds. `opt_g = Adam(D.parameters())` with
    `opt_d = Adam(G.parameters())` trains each network with the other's loss; two optimizers
    over `model.parameters()` both stepped update the same weights twice per batch. PyTorch
    raises nothing.
    Two optimizers over the same weights stepped in phases (one loop, then another, also as
    two inner loops an epoch loop runs in turn) are fine and not reported: only steps whose
    innermost loop is the same count.
    Known limits: both optimizers must be built and stepped in one function; swaps are found
    from G/D names (`netG`, `opt_d`, `discriminator`).
    """

    code = "GT406"
    gate_statements = True
    name = "optimizers-share-parameters"
    message = "{detail}"
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            opt_g = torch.optim.Adam(netD.parameters(), lr=2e-4)
            opt_d = torch.optim.Adam(netG.parameters(), lr=2e-4)
            for x in loader:
                opt_d.step()
                opt_g.step()
            """, at=(3, 0)),
        Bad("""
            import torch
            opt_a = torch.optim.SGD(model.parameters(), lr=0.1)
            opt_b = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x in loader:
                model(x).sum().backward()
                opt_a.step()
                opt_b.step()
            """, at=(3, 0)),
        Good("""
            import torch
            opt_g = torch.optim.Adam(netG.parameters(), lr=2e-4)
            opt_d = torch.optim.Adam(netD.parameters(), lr=2e-4)
            if args.sgd:
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            else:
                optimizer = torch.optim.Adam(model.parameters())
            for x in loader:
                opt_d.step()
                opt_g.step()
                optimizer.step()
            """),
        Good("""
            import torch
            warmup = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                model(x).sum().backward()
                warmup.step()
            finetune = torch.optim.LBFGS(model.parameters())
            for _ in range(5):
                finetune.step(closure)
            """),
    ]

    def visit_Call(self, call: ast.Call, ctx: Context) -> Iterator[Finding]:
        node = ctx.statement
        if not isinstance(node, ast.Assign) or node.value is not call \
                or not is_optimizer_call(call, ctx):
            return
        scope = ctx.scope()
        builds = optimizer_builds(scope)
        me = next((o for o in builds if o.stmt is node), None)
        if me is None:
            return
        if not step_lines(scope, me.name):
            # two attributes built alike (NOTE [optimizers built as attributes])
            yield from self._across_methods(me, builds, scope, ctx)
            return
        if not me.sources:
            return
        for other in builds:
            if other.stmt.lineno >= node.lineno or other.name == me.name \
                    or not step_lines(scope, other.name):
                continue
            detail = self._conflict(me, other, scope)
            if detail and (rest := odd_branch(other, builds)) is not None \
                    and odd_branch(me, builds) is None:  # NOTE [odd optimizer branch]
                seen: set[int] = ctx.memo("gt406-odd", ctx.tree, set)
                if id(other.stmt) not in seen:
                    seen.add(id(other.stmt))
                    yield self.report(other.stmt, ctx, related=[Related(
                        ctx.path, node.lineno, f"`{me.name}` is built here over the same "
                        "parameters", ctx.column(node))], detail=(
                        f"{detail}; this branch of `{other.name}` is the only one not built "
                        f"over `{'`, `'.join(x + '.parameters()' for x in sorted(rest))}`"))
                return
            if detail:
                yield self.report(node, ctx, related=[Related(
                    ctx.path, other.stmt.lineno, f"`{other.name}` is built here",
                    ctx.column(other.stmt))], detail=detail)
                return

    def _across_methods(self, me: OptimizerBuild, builds: list[OptimizerBuild], scope: Scope,
                        ctx: Context) -> Iterator[Finding]:
        """# NOTE [optimizers built as attributes]: ``self.a = Adam(P)`` and ``self.b = Adam(P)``
        built in one method from the same spelled parameters (a copy-paste slip: dreamer's
        ``value_optimizer`` over ``get_parameters(self.model_modules)``), both stepped in one
        pass of another method of the class: the weights take two steps per batch."""
        cls = ctx.analysis.class_of(scope.node)
        first = me.call.args[0] if me.call.args else keyword(me.call, "params")
        if cls is None or first is None or not me.name.startswith("self."):
            return
        for other in builds:
            o_first = other.call.args[0] if other.call.args else keyword(other.call, "params")
            if other.stmt.lineno >= me.stmt.lineno or other.name == me.name \
                    or not other.name.startswith("self.") or o_first is None:
                continue
            held = _shared_part(me, other, cls, ctx)
            if held is None and (ast.dump(o_first) != ast.dump(first) or rebound_in(
                    scope, first, other.stmt.lineno, me.stmt.lineno)):
                continue
            # a fresh gradient before each step: NOTE [each step its own gradient]
            if any(stepped_in_one_pass(ctx.scope(m), me.name, other.name)
                   and not (own_gradients(ctx.scope(m), me.name, other.name)
                            and not _named_for_another(me) and not _named_for_another(other))
                   for m in cls.methods.values() if m is not scope.node):
                src = f"`{ctx.code_of(first)}`" if held is None else \
                    f"the parameters of `{held}` (which `{next(iter(me.sources))}` holds)"
                yield self.report(me.stmt, ctx, related=[Related(
                    ctx.path, other.stmt.lineno, f"`{other.name}` is built here",
                    ctx.column(other.stmt))], detail=(
                    f"`{me.name}` and `{other.name}` are both built over {src} and both "
                    "stepped in one pass: each step updates the same weights twice"))
                return

    @staticmethod
    def _conflict(me: OptimizerBuild, other: OptimizerBuild, scope: Scope) -> str | None:
        if me.sources == other.sources and len(me.sources) == 1 \
                and _whole_params(me.call) and _whole_params(other.call) \
                and _stepped_together(scope, me.name, other.name) \
                and not (own_gradients(scope, me.name, other.name)
                         and not _named_for_another(me) and not _named_for_another(other)):
            (src,) = me.sources
            return (f"`{me.name}` and `{other.name}` are both built from `{src}.parameters()` "
                    "and both stepped: each step updates the same weights twice")
        if len(me.sources) == 1 and len(other.sources) == 1:
            (a,), (b,) = me.sources, other.sources
            ra, rb, sa, sb = role(me.name), role(other.name), role(a), role(b)
            if ra and rb and sa and sb and ra != rb and ra == sb and rb == sa:
                return (f"the optimizers look swapped: `{me.name}` steps `{a}` and "
                        f"`{other.name}` steps `{b}`")
        return None


def _named_for_another(b: OptimizerBuild) -> bool:
    """``optimizer_d = Adam(generator.parameters())``: an optimizer named for one GAN network
    and built over the other's parameters. Two such optimizers stepped each after its own
    backward still share weights by mistake (the discriminator never trains), so
    NOTE [each step its own gradient] does not excuse the pair."""
    r = role(b.name)
    return r is not None and any(role(s) not in (None, r) for s in b.sources)
