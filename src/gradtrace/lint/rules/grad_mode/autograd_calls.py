"""GT205, GT206: autograd entry points used so that no graph is recorded where training needs it."""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Iterator

from gradtrace.findings import Edit, Finding, Related
from gradtrace.lint.analysis.flag_switches import enabling_call
from gradtrace.lint.analysis.graphless import asked_grad
from gradtrace.lint.context import Context
from gradtrace.lint.flow import DETACHED, LEAF, NUMBER
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.instance_calls import passed_values
from gradtrace.lint.rules.grad_mode._carried import frozen_carried
from gradtrace.lint.rules.grad_mode._penalty_flow import (
    _kw, _penalty_path, _penalty_return, _tainted_sink, _targets, caller_sink, returned_penalty,
)
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

CHECKPOINTS = frozenset({"torch.utils.checkpoint.checkpoint",
                         "torch.utils.checkpoint.checkpoint_sequential"})
INT_NAME_RE = re.compile(r"(^|_)(ids|indices|mask|labels|index)$")
MOVE_METHODS = frozenset({"to", "cuda", "float", "half", "bfloat16", "double", "contiguous",
                          "view", "reshape", "permute", "squeeze", "unsqueeze"})
LOADER_RE = re.compile(r"(loader|batches|dataset|data)$", re.IGNORECASE)
# what returns gradients (or Jacobians, Hessians) with no graph unless `create_graph=True`
GRADIENTS = frozenset({"torch.autograd.grad", "torch.autograd.functional.jacobian",
                       "torch.autograd.functional.hessian"})


def _insert_kw(call: ast.Call, ctx: Context, text: str) -> Edit:
    """An edit adding ``, text`` after the last argument of ``call`` (or inside empty parens)."""
    last = max([*call.args, *(k.value for k in call.keywords)],
               key=lambda n: (n.end_lineno, n.end_col_offset), default=None)
    if last is None:
        line, col, sep = call.end_lineno, (ctx.end_column(call) or 1) - 1, ""
    else:
        line, col, sep = last.end_lineno, ctx.end_column(last) or 0, ", "
    return Edit(line, col, line, col, sep + text)  # type: ignore[arg-type]


class CheckpointInputWithoutGrad(Rule):
    """Reentrant `torch.utils.checkpoint` whose inputs cannot require grad: the block gets no grads.

    Why: with `use_reentrant=True` (the default when the argument is left out, up to at least
    torch 2.13, which warns "the use_reentrant parameter should be passed explicitly"), the
    checkpointed block is an autograd Function of its *inputs*. When no input requires grad
    (raw data, token ids, a detached or `no_grad` tensor), PyTorch warns
    `None of the inputs have requires_grad=True. Gradients will be None`, the output has no
    graph, and the parameters inside the block never receive a gradient. Pass
    `use_reentrant=False` (checked on torch 2.13: the block's weights then get their grads).
    Known limits: "cannot require grad" is decided for loader batches, integer-like names
    (`*_ids`, `*_mask`, `labels`), new tensors, detached values, values made under no-grad
    and outputs of a module frozen with `requires_grad_(False)` on such inputs;
    other inputs are left to the runtime (`gradtrace run`). A checkpoint that runs only once a
    method of the model turns a `self` flag on (`model.gradient_checkpointing_enable()`) is
    also reported at the script's call of that method (NOTE [flag turned on by a call]).
    """

    code = "GT205"
    gate_statements = True
    name = "checkpoint-input-without-grad"
    message = ("none of the inputs of {this} reentrant `checkpoint` can require grad ({why}): "
               "the parameters inside `{fn}` get no gradient")
    fix_title = "Pass `use_reentrant=False`"
    fix_safety = "unsafe"
    triggers = ("checkpoint(", "checkpoint_sequential(")
    examples = [
        Bad("""
            from torch.utils.checkpoint import checkpoint

            def train(model, loader, opt):
                for x, y in loader:
                    out = checkpoint(model.stem, x)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    opt.step()
            """, fixed="""
            from torch.utils.checkpoint import checkpoint

            def train(model, loader, opt):
                for x, y in loader:
                    out = checkpoint(model.stem, x, use_reentrant=False)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    opt.step()
            """, at=(5, 14)),
        Bad("""
            import torch.utils.checkpoint

            def forward(self, input_ids):
                return torch.utils.checkpoint.checkpoint(self.embed, input_ids, use_reentrant=True)
            """, fixed="""
            import torch.utils.checkpoint

            def forward(self, input_ids):
                return torch.utils.checkpoint.checkpoint(self.embed, input_ids, use_reentrant=False)
            """),
        Bad("""
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint
            text_encoder = nn.Embedding(16, 8).requires_grad_(False)
            block = nn.Linear(8, 8)
            input_ids = torch.randint(0, 16, (2, 5))
            hidden = text_encoder(input_ids)
            hidden = checkpoint(block, hidden, use_reentrant=True)
            """, fixed="""
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint
            text_encoder = nn.Embedding(16, 8).requires_grad_(False)
            block = nn.Linear(8, 8)
            input_ids = torch.randint(0, 16, (2, 5))
            hidden = text_encoder(input_ids)
            hidden = checkpoint(block, hidden, use_reentrant=False)
            """, at=(8, 9)),
        Good("""
            from torch.utils.checkpoint import checkpoint

            def forward(self, hidden_states):
                for block in self.blocks:
                    hidden_states = checkpoint(block, hidden_states, use_reentrant=True)
                return hidden_states
            """),
        Good("""
            from torch.utils.checkpoint import checkpoint

            def forward(self, input_ids):
                return checkpoint(self.embed, input_ids, use_reentrant=False)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        qual = ctx.qualified_name(node.func)
        if qual not in CHECKPOINTS or ctx.grad_disabled is not None:
            return
        kw = _kw(node, "use_reentrant")
        if kw is not None and not (isinstance(kw.value, ast.Constant) and kw.value.value is True):
            return
        if qual.endswith("sequential"):
            inputs = node.args[2:3] or [k.value for k in node.keywords if k.arg == "input"]
        else:
            inputs = node.args[1:]
        if not inputs or any(isinstance(a, ast.Starred) for a in inputs):
            return
        whys = [_no_grad_reason(a, ctx) for a in inputs]
        if any(w is None for w in whys):
            return
        edit = ctx.edit(kw.value, "False") if kw is not None \
            else _insert_kw(node, ctx, "use_reentrant=False")
        fn = ctx.source(node.args[0]) if node.args else "the block"
        why = "; ".join(dict.fromkeys(whys))
        yield self.report(node, ctx, fix=self.fix(edit), why=why, fn=fn, this="this")
        on = enabling_call(ctx, ctx.scope().node, ctx.statement)  # NOTE [flag turned on by a call]
        told = ctx.memo("gt205-told-calls", ctx.tree, set)
        if on is not None and id(on) not in told:
            told.add(id(on))
            yield self.report(on, ctx, why=why, fn=fn, this=f"the (line {node.lineno})",
                              related=[Related(ctx.path, node.lineno, "the checkpoint it turns "
                                               "on", ctx.column(node))])


def _no_grad_reason(a: ast.expr, ctx: Context, scope: Scope | None = None,
                    depth: int = 0) -> str | None:
    if isinstance(a, ast.Constant):
        return "a constant"
    if isinstance(a, ast.Subscript):
        key = a.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) \
                and INT_NAME_RE.search(key.value):
            return f"`{ctx.source(a)}` holds integers"
        base = _no_grad_reason(a.value, ctx, scope, depth) if isinstance(a.value, ast.Name) \
            else None
        return base if base is not None and "batch" in base else None
    name = dotted(a)
    if name is not None and INT_NAME_RE.search(name.rpartition(".")[2]):
        return f"`{name}` holds integers"
    scope = scope or ctx.scope()
    kind = scope.kind(a)
    if isinstance(a, ast.Name) and kind in (LEAF, DETACHED) and asked_grad(
            scope, a.id, a.lineno):
        return None  # `x = inp.detach(); x.requires_grad = True`: a leaf asked for grad
    if kind == LEAF and not _has_requires_grad(a, scope, name):
        return f"`{ctx.source(a)}` is a new tensor"
    if kind in (DETACHED, NUMBER):
        return f"`{ctx.source(a)}` is detached"
    frozen = _frozen_output(a, scope, ctx) if isinstance(a, ast.Name) else None
    if frozen is not None:
        return frozen
    if name is not None and isinstance(a, ast.Name):
        b = scope.binding_before(name, a.lineno)
        for _ in range(4):  # x = x.to(device).float(): still the loader's batch
            v = b.value if b is not None else None
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                    and v.func.attr in MOVE_METHODS:
                v = v.func.value
            if not isinstance(v, ast.Name) or v is (b.value if b else None):
                break
            b = scope.binding_before(v.id, b.line)  # type: ignore[union-attr]
        if b is not None and isinstance(b.stmt, (ast.For, ast.AsyncFor)):
            it = b.stmt.iter
            if isinstance(it, ast.Call) and dotted(it.func) in ("enumerate", "tqdm", "tqdm.tqdm"):
                it = it.args[0] if it.args else it
            src = dotted(it) or ""
            if LOADER_RE.search(src.rpartition(".")[2]):
                return f"`{name}` is a batch from `{src}`"
    if isinstance(a, ast.Name) and depth == 0 and isinstance(scope.node, ast.FunctionDef) \
            and scope.binding_before(a.id, a.lineno) is None:
        return _given_data(a.id, scope.node, ctx)
    if isinstance(a, ast.Name) and depth == 0 and isinstance(scope.node, ast.FunctionDef):
        return frozen_carried(a, scope, ctx, INT_NAME_RE)  # the LoRA checkpoint loop
    return None


def _given_data(name: str, fn: ast.FunctionDef, ctx: Context) -> str | None:
    """``forward``'s parameter ``name`` when every call of an instance of its class passes a
    value that cannot require grad there (NOTE [instance calls])."""
    got = passed_values(ctx, fn, name)
    if not got:
        return None
    whys = [_no_grad_reason(v, ctx, ctx.scope(w), 1) for v, w in got]
    if any(w is None for w in whys):
        return None
    first = got[0][0]
    return f"`{name}` is what the model is given, {whys[0]} (line {first.lineno})"


def _frozen_output(a: ast.Name, scope: Scope, ctx: Context) -> str | None:
    """Why ``a`` needs no grad when it is the output of a frozen module
    (``enc = nn.Embedding(...).requires_grad_(False)``; ``h = enc(ids)``) on inputs that need
    none either; None otherwise."""
    b = scope.binding_before(a.id, a.lineno)
    v = b.value if b is not None else None
    if not isinstance(v, ast.Call) or not v.args or v.keywords:
        return None
    mod = dotted(v.func)
    if mod is None or not ctx.analysis.is_module(v.func, scope, b.line):  # type: ignore[union-attr]
        return None
    mb = scope.binding_before(mod, b.line)  # type: ignore[union-attr]
    chain = mb.value if mb is not None else None
    frozen = False
    while isinstance(chain, ast.Call) and isinstance(chain.func, ast.Attribute):
        if chain.func.attr == "requires_grad_" and chain.args and \
                isinstance(chain.args[0], ast.Constant) and chain.args[0].value is False:
            frozen = True
        chain = chain.func.value
    if not frozen:
        return None
    for x in v.args:
        if _no_grad_reason(x, ctx, scope, 1) is None:
            return None
    return f"`{a.id}` comes from the frozen `{mod}` (line {mb.line}) on inputs that need no grad"  # type: ignore[union-attr]


def _has_requires_grad(a: ast.expr, scope: object, name: str | None) -> bool:
    b = scope.binding_before(name, a.lineno) if name else None  # type: ignore[attr-defined]
    value = b.value if b is not None else a
    return value is not None and any(
        isinstance(n, ast.keyword) and n.arg == "requires_grad" for n in walk(value))


def _outside_loop_of(call: ast.Call, sink: ast.AST, scope: object) -> bool:
    """The backward runs in a loop that ``call`` is not in: the gradient is made once and
    read at every pass (a fixed target, e.g. reference forces), never the trained term."""
    for s in walk(scope.node):  # type: ignore[attr-defined]
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)) \
                and s.lineno <= sink.lineno <= (s.end_lineno or s.lineno) \
                and not s.lineno <= call.lineno <= (s.end_lineno or s.lineno):
            return True
    return False


class GradientPenaltyWithoutCreateGraph(Rule):
    """`torch.autograd.grad` feeds a loss term (gradient penalty) without `create_graph=True`.

    Why: without `create_graph=True` the gradients returned by `torch.autograd.grad` are plain
    tensors with no `grad_fn`. A penalty built from them (`((g.norm(2, dim=1) - 1) ** 2).mean()`)
    is a constant: it adds nothing to the model's gradients, and when it is the whole loss
    `backward()` raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`
    (checked on torch 2.13; with `create_graph=True` the weights get their gradient).
    Gradients used to perturb an input (FGSM, `x + eps * g.sign()`) or first-order
    meta-learning updates do not need a graph and are not reported.
    A torch loss comparing the gradient with other gradients made without a graph before it
    (force matching: `mse(forces, ref_forces)`, aiqm/torchani#238) is such a term too, and so
    is one comparing it with data that has no graph: a new tensor, a detached value, or one
    computed from the inputs before they were set to require grad (derivative matching:
    `mse(grad(out.sum(), x)[0], dy)`). Next to anything else (a model's output, a leaf made
    with `requires_grad=True`) the gradient is a target and is not reported, nor is a
    gradient made once outside the loop that runs `backward()`.
    `torch.autograd.functional.jacobian`/`hessian` without `create_graph=True` return
    results without a graph too (torch 2.13: `requires_grad` False). A term returned by a
    helper reaches a `backward()` when a call of the helper does, through arithmetic,
    reductions and norms (a Taylor step `g(a) + jacobian(g, a) * (x - a)` returned and
    backpropagated by the caller: the Jacobian's own derivative is lost, pytorch#103509).
    Known limits: the penalty must reach a `backward()` in the same function, be returned
    by a function named like a penalty (`gradient_penalty`, `r1_penalty`, `compute_gp`), or
    by a helper whose every call the file shows (NOTE [parameter kinds]) and one of them
    reaches a `backward()`; a gradient carried in a dict is not followed.
    """

    code = "GT206"
    gate_statements = True
    name = "gradient-penalty-without-create-graph"
    message = ("the gradient from `{call}` becomes a loss term (`{sink}`, line {line}), but "
               "without `create_graph=True` it has no graph: backward takes it as a constant "
               "(a penalty of it alone trains nothing)")
    fix_title = "Pass `create_graph=True`"
    fix_safety = "unsafe"
    # `from torch.autograd import grad` then `grad(out.sum(), x)`: the statement names no
    # "autograd" (the qualified name decides; NOTE [triggers])
    triggers = ("autograd", "grad(", "jacobian(", "hessian(")
    examples = [
        Bad("""
            import torch

            def critic_step(D, real, fake, opt, lam=10.0):
                eps = torch.rand(real.size(0), 1)
                mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
                grad = torch.autograd.grad(D(mix).sum(), mix)[0]
                gp = ((grad.norm(2, dim=1) - 1) ** 2).mean()
                loss = D(fake).mean() - D(real).mean() + lam * gp
                loss.backward()
                opt.step()
            """, fixed="""
            import torch

            def critic_step(D, real, fake, opt, lam=10.0):
                eps = torch.rand(real.size(0), 1)
                mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
                grad = torch.autograd.grad(D(mix).sum(), mix, create_graph=True)[0]
                gp = ((grad.norm(2, dim=1) - 1) ** 2).mean()
                loss = D(fake).mean() - D(real).mean() + lam * gp
                loss.backward()
                opt.step()
            """, at=(6, 11)),
        Bad("""
            from torch import autograd

            def gradient_penalty(critic, mix):
                g = autograd.grad(critic(mix).sum(), mix, create_graph=False)[0]
                return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
            """, fixed="""
            from torch import autograd

            def gradient_penalty(critic, mix):
                g = autograd.grad(critic(mix).sum(), mix, create_graph=True)[0]
                return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
            """, at=(4, 8)),
        Bad("""
            import torch
            import torch.nn as nn
            def train_step(net, opt, pos, true_forces):
                pos = pos.detach().requires_grad_(True)
                ref = -torch.autograd.grad((pos ** 2).sum(), pos)[0]
                energy = net(pos).sum()
                forces = -torch.autograd.grad(energy, pos, retain_graph=True)[0]
                loss = energy ** 2 + nn.MSELoss()(forces, ref)
                loss.backward()
                opt.step()
            """, at=(7, 14)),
        Bad("""
            import torch
            def linearized(g, x, a):
                slope = torch.autograd.functional.jacobian(g, a)
                return g(a) + slope * (x - a)
            def fit(g, x, a, y, opt):
                loss = ((linearized(g, x, a) - y) ** 2).sum()
                loss.backward()
                opt.step()
            """, at=(3, 12)),
        Good("""
            import torch
            import torch.nn.functional as F

            def adversarial_step(model, x, y, opt, eps=0.03):
                x = x.clone().requires_grad_(True)
                g = torch.autograd.grad(F.cross_entropy(model(x), y), x)[0]
                x_adv = (x + eps * g.sign()).detach()
                loss = F.cross_entropy(model(x_adv), y)
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch

            def critic_step(D, mix, opt):
                grad = torch.autograd.grad(D(mix).sum(), mix, create_graph=True)[0]
                loss = ((grad.norm(2, dim=1) - 1) ** 2).mean()
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        q = ctx.qualified_name(node.func)
        if q not in GRADIENTS or ctx.grad_disabled is not None \
                or q != "torch.autograd.grad" and len(node.args) > 2:
            return  # `jacobian(f, x, True)`: create_graph given by position
        kw = _kw(node, "create_graph")
        if kw is not None and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
            return
        scope = ctx.scope()
        stmt = scope.statement_of(node)
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) \
                or not _penalty_path(node, stmt.value, ctx, node.lineno):  # type: ignore[arg-type]
            return
        tainted = _targets(stmt)
        sink = _tainted_sink(scope, stmt, tainted, ctx)
        if sink is None:
            sink = _penalty_return(scope, stmt, _targets(stmt), ctx)
        if sink is None and returned_penalty(scope, stmt, _targets(stmt), ctx) is not None:
            sink = caller_sink(scope, ctx)  # a helper's term, backpropagated by its caller
        elif sink is not None and _outside_loop_of(node, sink, scope):
            return
        if sink is None:
            return
        edit = ctx.edit(kw.value, "True") if kw is not None \
            else _insert_kw(node, ctx, "create_graph=True")
        what = "returns the penalty" if isinstance(sink, ast.Return) else "differentiates the penalty"
        related = (Related(ctx.path, sink.lineno, f"`{ctx.source(sink)}` {what} here",
                           ctx.column(sink)),)
        yield self.report(node, ctx, related=related, fix=self.fix(edit),
                          call=ctx.source(node.func), sink=ctx.source(sink), line=sink.lineno)
