"""GT720: a distribution's `sample()` where the loss needs the gradient through the sample."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.grad_values import GRAD_FACTORIES, requires_grad
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.calls import INDEPENDENT, LOCATION_SCALE

# relaxed (Gumbel-softmax, Concrete) families: made to be differentiated through their samples
RELAXED = frozenset({
    "torch.distributions.RelaxedBernoulli", "torch.distributions.RelaxedOneHotCategorical",
    "torch.distributions.relaxed_bernoulli.RelaxedBernoulli",
    "torch.distributions.relaxed_categorical.RelaxedOneHotCategorical",
})
# arguments that are not the distribution's parameters
NOT_PARAMS = frozenset({"temperature", "validate_args", "reinterpreted_batch_ndims"})
# what a sample may be given to without needing its gradient
DENSITY = frozenset({"log_prob", "cdf", "icdf", "entropy"})


def _family(e: ast.AST | None, ctx: Context) -> tuple[str, ast.Call] | None:
    """``(short name, the call)`` when ``e`` builds a reparameterisable distribution."""
    if not isinstance(e, ast.Call):
        return None
    q = ctx.qualified_name(e.func) or ""
    if q in INDEPENDENT and e.args:
        return _family(e.args[0], ctx)
    return (q.rpartition(".")[2], e) if q in LOCATION_SCALE | RELAXED else None


def _learned(call: ast.Call, fn: ast.AST, ctx: Context) -> bool:
    """Whether a parameter of the distribution is computed from the function's arguments or
    locals (``dist.logits`` of an argument too): not numbers, tensor factories
    (``torch.zeros(n, 2)``) or attributes of ``self`` (a fixed prior, a buffer)."""
    args = [*call.args, *(k.value for k in call.keywords if k.arg not in NOT_PARAMS)]
    if (ctx.qualified_name(call.func) or "") in RELAXED and call.args:
        args = args[1:]  # the temperature
    a = getattr(fn, "args", None)
    names = set(ctx.scope(fn).bindings) if a is None else {
        x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} | set(ctx.scope(fn).bindings)
    names.discard("self")
    todo: list[ast.AST] = list(args)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call):
            if (ctx.qualified_name(n.func) or "") in GRAD_FACTORIES:
                continue
            todo.extend((*n.args, *(k.value for k in n.keywords)))
            if isinstance(n.func, ast.Attribute):
                todo.append(n.func.value)
        elif isinstance(n, ast.Name):
            if n.id in names:
                return True
        elif isinstance(n, ast.Attribute):
            if not (dotted(n) or "self.").startswith("self."):
                todo.append(n.value)  # `dist.logits` of an argument, not `self.prior_mu`
        else:
            todo.extend(ast.iter_child_nodes(n))
    return False


class SampleWhereGradientNeeded(Rule):
    """A sample drawn with `sample()` is fed to a network (a decoder, a critic) or used as a
    relaxed (Gumbel-softmax) draw: no gradient flows back through it.

    Why: `Distribution.sample()` runs under `torch.no_grad()`: its result never requires grad,
    whatever the distribution's parameters (verified on torch 2.13). A VAE whose latent is
    `Normal(mu, std).sample()`, or a SAC actor scored by `critic(state, dist.sample())`,
    trains its encoder or actor without the reconstruction or Q-value term, silently;
    `RelaxedBernoulli(...).sample()` and `RelaxedOneHotCategorical(...).sample()` lose the
    only reason to use a relaxed distribution. Use `rsample()` (the reparameterisation trick).
    A score-function loss (`-(d.log_prob(a) * advantage)`) needs `sample()`: a sample given
    only to `log_prob`, the environment or a buffer is fine, and so is a draw under `no_grad`.
    `torch.normal(mean, std)` is the same draw spelled as a function: it records a graph, but
    its backward gives zeros to `mean` and `std` (verified on torch 2.13), so a bottleneck
    sampled with `torch.normal(z_mu, sigma)` (ml-agents' VAIL discriminator) trains nothing
    before it through the sample; reported when `mean` surely requires grad (a layer's
    output), not for noise around data (`torch.normal(x, 0.1)`). Write
    `mean + std * torch.randn_like(mean)`.
    Known limits: the distribution must be built in the same function from values computed
    there or from the function's arguments, the draw assigned to a name, and the network called
    with that name (or a value made from it on the way) in the same function.
    """

    code = "GT720"
    name = "sample-where-gradient-needed"
    message = ("{sample} is drawn with {drawn}: "
               "{use}, but no gradient flows back through the sample into the parameters of "
               "the {family}; {remedy}")
    triggers = ("sample(", "normal(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            from torch.distributions import Normal

            class VAE(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 4)
                    self.dec = nn.Linear(2, 8)

                def forward(self, x):
                    mu, logvar = self.enc(x).chunk(2, -1)
                    z = Normal(mu, (0.5 * logvar).exp()).sample()
                    return self.dec(z), mu, logvar
            """, at=(13, 8)),
        Bad("""
            import torch
            from torch.distributions import RelaxedOneHotCategorical

            def select(logits, values, tau):
                w = RelaxedOneHotCategorical(tau, logits=logits).sample()
                return (w * values).sum(-1)
            """, at=(5, 4)),
        Bad("""
            import torch
            import torch.nn as nn

            class Bottleneck(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mu, self.head = nn.Linear(8, 4), nn.Linear(4, 1)
                    self.sigma = nn.Parameter(torch.ones(4))

                def forward(self, h):
                    z_mu = self.mu(h)
                    z = torch.normal(z_mu, self.sigma)
                    return self.head(z), z_mu
            """, at=(12, 8)),
        Good("""
            import torch
            from torch.distributions import Normal

            def actor_loss(actor, critic, s, alpha):
                mu, log_std = actor(s)
                d = Normal(mu, log_std.exp())
                a = d.rsample()
                return (alpha * d.log_prob(a).sum(-1) - critic(s, a)).mean()

            def reinforce_loss(policy, env, s):
                mu = policy(s)
                d = Normal(mu, 1.0)
                a = d.sample()
                r = env.step(a)
                return -(d.log_prob(a) * r).mean()

            def generate(decoder, n):
                z = Normal(torch.zeros(n, 2), torch.ones(n, 2)).sample()
                return decoder(z)

            def augmented(model, x):
                return model(torch.normal(x, 0.1))

            def critic_target(actor, critic_t, s2):
                with torch.no_grad():
                    d = Normal(*actor(s2))
                    a2 = d.sample()
                    return critic_t(s2, a2)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        drawn = "`{dist}.sample()`, which runs under `no_grad`"
        if _normal_of_graph(node, ctx):  # `torch.normal(z_mu, sigma)`: zero gradients
            fam: tuple[str, ast.Call] | None = ("normal draw", node)
            d, drawn = None, ("`torch.normal(mean, std)`, whose backward gives zeros to "
                              "`mean` and `std`")
        elif not (isinstance(f, ast.Attribute) and f.attr == "sample") \
                or ctx.grad_disabled is not None:
            return
        else:
            d = dotted(f.value)
            db = ctx.scope().binding_before(d, node.lineno) if d is not None else None
            fam = _family(f.value if d is None else db.value if db is not None else None, ctx)
        fn = ctx.function or ctx.tree  # a script's loop too
        scope = ctx.scope()
        if fam is None or not _learned(fam[1], fn, ctx):
            return
        family, built = fam
        dist = d or f"{fam[0]}(...)"
        drawn = drawn.format(dist=dist)
        parent = ctx.parent
        relaxed = (ctx.qualified_name(built.func) or "") in RELAXED
        if isinstance(parent, ast.Return) and parent.value is node \
                and isinstance(fn, FUNCTION_TYPES):  # a helper's result
            name, use = f"the result of `{getattr(fn, 'name', '')}()`", _caller_use(fn, ctx)
        elif isinstance(parent, ast.Assign) and parent.value is node \
                and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            var = parent.targets[0].id
            until = min((b.line for b in scope.bindings.get(var, []) if b.line > node.lineno
                         and not scope.exclusive(b.stmt, parent)), default=10**9)
            name, use = f"`{var}`", _network_use(var, node.lineno, fn, scope, ctx, until)
            if use is None and relaxed:
                use = _any_use(var, node.lineno, fn, until)
        else:
            return
        if use is None or isinstance(use, ast.Call) and _only_detached(use, fn):
            return  # NOTE [sample read only detached]
        what = (f"it is given to `{ctx.source(use.func)}(...)` (line {use.lineno})"
                if isinstance(use, ast.Call) else f"it is used on line {use.lineno}")
        yield self.report(parent, ctx, related=(Related(
            ctx.path, use.lineno, "the sample is used here", ctx.column(use)),),
            sample=name, drawn=drawn, use=what, family=family,
            remedy="draw it as `mean + std * torch.randn_like(mean)`"
            if drawn.startswith("`torch.normal") else "draw it with `rsample()`")


# NOTE [sample read only detached]
# An importance sampler draws with `sample()` on purpose: VERA's entropy estimator scores the
# posterior draws with the generator (`logq, logits = self.logq_joint(xr, h_given_x)`), turns
# the scores into weights, and keeps only `(fvals * w).sum(0).detach()`. No value computed
# from the network's result leaves the function or reaches a `backward()` undetached, so the
# gradient through the sample is never asked for and `rsample()` would change nothing
# (unseen54a, selflein's EBM-OOD-Detection). Followed forward through plain name bindings
# in the function; any other use (a return, an argument of a call statement, a store into an
# attribute or a container, a loop over it) counts as needing the gradient.
DETACHED_BY = frozenset({"detach", "item", "tolist", "numpy"})


def _undetached_names(e: ast.AST) -> set[str]:
    """Names read in ``e`` outside the receiver of a ``.detach()``/``.item()``/... call."""
    out: set[str] = set()
    todo: list[ast.AST] = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in DETACHED_BY:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _only_detached(use: ast.Call, fn: ast.AST) -> bool:
    """Whether the statement holding the network call ``use`` binds plain names whose every
    later use, through plain name bindings, is inside a detaching call
    (NOTE [sample read only detached])."""
    stmts = sorted((s for s in walk(fn) if isinstance(s, ast.stmt)
                    and not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))),
                   key=lambda s: (s.lineno, s.col_offset))
    owner = next((s for s in stmts if isinstance(s, ast.Assign)
                  and any(n is use for n in walk(s.value))), None)
    if owner is None:
        return False
    tainted: set[str] = set()
    for t in owner.targets:
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        if not all(isinstance(x, ast.Name) for x in elts):
            return False
        tainted.update(x.id for x in elts)  # type: ignore[union-attr]
    for s in stmts:
        if s is owner or s.lineno < owner.lineno:
            continue
        if isinstance(s, (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
                          ast.Try)):
            heads = [getattr(s, a) for a in ("test", "iter") if hasattr(s, a)] + [
                w.context_expr for w in getattr(s, "items", ())]
            if any(_undetached_names(h) & tainted for h in heads):
                return False
            continue  # their bodies are statements of their own
        if isinstance(s, ast.Pass | ast.Break | ast.Continue):
            continue
        value = getattr(s, "value", None)
        reads = _undetached_names(value) if value is not None else set().union(
            *(_undetached_names(c) for c in ast.iter_child_nodes(s)))
        if not reads & tainted:
            continue
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] \
            if isinstance(s, ast.AnnAssign) else []
        names = [x for t in targets for x in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if not names or not all(isinstance(x, ast.Name) for x in names):
            return False  # returned, handed to a call, stored, augmented: it may need grad
        tainted.update(x.id for x in names)  # type: ignore[union-attr]
    return True


def _normal_of_graph(node: ast.Call, ctx: Context) -> bool:
    """``torch.normal(mean, std)`` whose ``mean`` surely requires grad (a layer's output),
    with grad on."""
    if (ctx.qualified_name(node.func) or "") != "torch.normal" or ctx.grad_disabled is not None:
        return False
    mean = node.args[0] if node.args else next(
        (k.value for k in node.keywords if k.arg == "mean"), None)
    if mean is None or isinstance(mean, (ast.Constant, ast.Starred)):
        return False
    return requires_grad(ctx, ctx.function or ctx.tree, mean, node.lineno) is not None


def _loads(name: str, after: int, fn: ast.AST, until: int = 10**9) -> list[ast.Name]:
    """Reads of ``name`` after line ``after``, up to line ``until`` (its next binding)."""
    return sorted((n for n in walk(fn) if isinstance(n, ast.Name) and n.id == name
                   and isinstance(n.ctx, ast.Load) and after < n.lineno <= until),
                  key=lambda n: (n.lineno, n.col_offset))


def _density_args(fn: ast.AST) -> set[int]:
    """ids of the nodes inside the arguments of a ``log_prob``/``entropy``... call."""
    return {id(x) for n in walk(fn) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr in DENSITY
            for a in n.args for x in walk(a)}


def _any_use(name: str, after: int, fn: ast.AST, until: int) -> ast.AST | None:
    """The first read of a relaxed draw outside its own density."""
    dens = _density_args(fn)
    return next((n for n in _loads(name, after, fn, until) if id(n) not in dens), None)


def _network_use(name: str, after: int, fn: ast.AST, scope: object, ctx: Context,
                 until: int = 10**9) -> ast.Call | None:
    """The first call of a module (or of a method of the module class being defined) given
    ``name``, or a value made from it on the way (``h = torch.cat([s, a], -1)``, ``z * 2``)."""
    cls = ctx.analysis.class_of(fn)
    dens = _density_args(fn)
    names, todo = {name}, [name]
    calls = [n for n in walk(fn) if isinstance(n, ast.Call)]
    while todo:
        cur = todo.pop()
        loads = {id(x) for x in _loads(cur, after, fn, until if cur == name else 10**9)} - dens
        for n in calls:
            if any(id(x) in loads for a in (*n.args, *(k.value for k in n.keywords))
                   for x in walk(a)) and _is_network(n, cls, scope, ctx):
                return n
        for s in walk(fn):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and s.lineno > after \
                    and isinstance(s.targets[0], ast.Name) and s.targets[0].id not in names \
                    and len(names) < 6 and _carries(s.value, ctx) \
                    and any(id(x) in loads for x in walk(s.value)):
                names.add(s.targets[0].id)
                todo.append(s.targets[0].id)
    return None


def _caller_use(fn: ast.AST, ctx: Context) -> ast.Call | None:
    """For a function returning the draw: the network a caller gives its result to
    (``z = self.reparameterize(mu, logvar)`` then ``self.decode(z)``)."""
    for call, where in function_sites(ctx.analysis, fn) or ():  # type: ignore[arg-type]
        if not isinstance(where, FUNCTION_TYPES):
            continue
        scope = ctx.scope(where)
        if scope.grad_off_at(call) is not None:
            continue
        cls = ctx.analysis.class_of(where)
        owner = next((s for s in walk(where) if isinstance(s, ast.Assign) and s.value is call
                      and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)), None)
        if owner is not None:
            use = _network_use(owner.targets[0].id, owner.lineno, where, scope, ctx)
            if use is not None:
                return use
        outer = next((n for n in walk(where) if isinstance(n, ast.Call) and any(
            a is call for a in n.args)), None)
        if outer is not None and _is_network(outer, cls, scope, ctx):
            return outer
    return None


def _carries(e: ast.AST, ctx: Context) -> bool:
    """Whether ``e`` passes its operands' values on: arithmetic, a subscript, a tuple, a
    ``torch.*`` function (``torch.cat``, ``torch.tanh``), not any other call."""
    if isinstance(e, ast.Call):
        q = ctx.qualified_name(e.func) or ""
        return q.startswith("torch.") and not q.startswith("torch.nn.") \
            and q not in GRAD_FACTORIES
    return isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Tuple, ast.List))


def _is_network(n: ast.Call, cls: object, scope: object, ctx: Context) -> bool:
    """A call of a module, or of a method of the module class being defined
    (``self.decode(z)``)."""
    f = n.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
            and f.attr in getattr(cls, "methods", {}):
        return True
    k = ctx.analysis.kind(f, scope, n.lineno)  # type: ignore[arg-type]
    return k is not None and k.what == MODULE
