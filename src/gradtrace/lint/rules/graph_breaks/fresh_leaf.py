"""GT119: a computed value re-made into a new leaf that requires grad, whose gradient nobody can
read (an operand of the loss, or a helper's result only computed with)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.layer_params import layer_parameter
from gradtrace.lint.analysis.param_attrs import file_freezes, forward_methods
from gradtrace.lint.analysis.returned_leaves import returned_leaf_fn
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks._param_leaf import parameter_mid_forward
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.excerpt import excerpt

# what takes the values of a tensor without its history
CUTS = frozenset({"detach", "detach_", "data"})
# conversions GT102 / GT103 report as the cut
NUMBER_CUTS = frozenset({"item", "tolist", "numpy"})
# what hands a tensor's gradient to the code: a read, a hook, a request, a trainer
GRAD_USES = frozenset({"grad", "register_hook", "retain_grad", "register_post_accumulate_grad_hook"})


def _parents(ctx: Context) -> dict[int, ast.AST]:
    return file_parents(ctx)


def _fresh_leaf(node: ast.Call, ctx: Context) -> ast.AST | None:
    """The cut a call makes a new leaf that requires grad from, when its values come from a
    computed tensor: ``t.detach()...requires_grad_(True)`` (the flag literally true) or
    ``torch.tensor(<expression of variables>, requires_grad=True)``."""
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
        if node.keywords or node.args and not (
                isinstance(node.args[0], ast.Constant) and node.args[0].value is True):
            return None
        e: ast.AST = f.value
        while isinstance(e, (ast.Call, ast.Attribute, ast.Subscript)):
            if isinstance(e, ast.Attribute) and e.attr in CUTS:
                return e
            e = e.func if isinstance(e, ast.Call) else e.value  # type: ignore[union-attr]
        return None
    if not node.args or not any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                                and k.value.value is True for k in node.keywords) \
            or (ctx.qualified_name(f) or "") != "torch.tensor":
        return None
    data = node.args[0]
    if any(isinstance(n, ast.Call) and (isinstance(n.func, ast.Attribute) and n.func.attr in
           NUMBER_CUTS or isinstance(n.func, ast.Name) and n.func.id in ("float", "int"))
           for n in walk(data)):
        return None  # a Python number or NumPy array in between: GT102 / GT103 name the cut
    # a tensor expression: a comparison, a method or function call on a variable
    if any(isinstance(n, ast.Compare) or isinstance(n, ast.Call) and any(
            isinstance(m, ast.Name) for m in walk(n)) for n in walk(data)):
        return data
    return None


def _grad_wanted(name: str, ctx: Context) -> bool:
    """Whether the file can ever see the gradient of what ``name`` holds: ``name.grad``, a
    hook or ``retain_grad`` on it, or ``name`` given to ``torch.autograd.*`` or an optimizer."""
    for n in walk(ctx.tree):
        v = n.value if isinstance(n, ast.Attribute) else None
        while isinstance(v, ast.Subscript):
            v = v.value  # `got[0].grad`: an element of what the name holds
        if isinstance(n, ast.Attribute) and n.attr in GRAD_USES and dotted(v) == name:
            return True
        if isinstance(n, ast.Call):
            q = ctx.qualified_name(n.func) or ""
            if (q.startswith("torch.autograd.") or q.startswith("torch.optim.")) and any(
                    isinstance(a, (ast.Name, ast.Attribute)) and dotted(a) == name
                    for arg in [*n.args, *(k.value for k in n.keywords)] for a in walk(arg)):
                return True
    return False


def _unreadable_result(fn: ast.AST, ctx: Context) -> list[ast.Call] | None:
    """The calls of the file's function ``fn`` when each one's result is computed with or
    bound to a name whose gradient the file never asks for (None: not called, or one is
    bound elsewhere: returned, stored on an object, given to another call)."""
    name = getattr(fn, "name", None)
    parents = _parents(ctx)
    calls = []
    for n in walk(ctx.tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if not (isinstance(f, ast.Name) and f.id == name or isinstance(f, ast.Attribute)
                and f.attr == name and isinstance(f.value, ast.Name) and f.value.id == "self"):
            continue
        up = parents.get(id(n))
        if isinstance(up, (ast.BinOp, ast.UnaryOp)):
            calls.append(n)
        elif isinstance(up, ast.Assign) and len(up.targets) == 1 \
                and isinstance(up.targets[0], ast.Name) and not _grad_wanted(up.targets[0].id, ctx):
            calls.append(n)
        else:
            return None
    return calls or None


COMPS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)


def _forward_leaf(node: ast.Call, cut: ast.AST, up: ast.AST | None, ctx: Context) -> bool:
    """Whether ``node`` re-leafs, in ``forward`` (or a method it calls) of a module class of
    the file, a value made from one of the module's own submodules' outputs, and hands the
    leaf on inside ``forward`` (bound to a name, or an element of a comprehension), in a file
    that never asks for any tensor's gradient and freezes nothing: the submodule gets no
    gradient from anything ``forward`` returns."""
    fn = ctx.function
    cls = ctx.analysis.class_of(fn) if fn is not None else None
    if fn is None or cls is None or not cls.is_module or \
            not any(fn is m for m in forward_methods(cls)):
        return False
    if not (isinstance(up, COMPS) and up.elt is node or isinstance(up, ast.Assign)):
        return False
    if file_freezes(ctx) or ctx.memo("gt119-grad-read", ctx.tree, lambda: _reads_grads(ctx)):
        return False
    src = cut.value if isinstance(cut, ast.Attribute) else cut
    comps = [up] if isinstance(up, COMPS) else []
    return _from_submodule(src, fn, node.lineno, comps, ctx, 0)


def _reads_grads(ctx: Context) -> bool:
    """Whether the file reads a ``.grad`` of something not known to be a Parameter, hooks or
    retains a gradient, or asks ``torch.autograd`` for one."""
    fns = [ctx.tree, *ctx.analysis.functions.values(),
           *(m for c in ctx.analysis.classes.values() for m in c.methods.values())]
    for fn in fns:
        for n in scope_nodes(fn):
            if isinstance(n, ast.Call) and \
                    (ctx.qualified_name(n.func) or "").startswith("torch.autograd."):
                return True
            if isinstance(n, ast.Attribute) and n.attr in GRAD_USES:
                k = ctx.analysis.kind_in(n.value, fn, n.lineno)
                if (k is None or k.what != PARAMETER) and \
                        layer_parameter(ctx, fn, n.value, n.lineno) is None:
                    return True
    return False


def _from_submodule(e: ast.AST, fn: ast.AST, line: int, comps: list[ast.AST], ctx: Context,
                    depth: int) -> bool:
    """Whether ``e`` (read at ``line``) is computed from the output of a call of a submodule
    on ``self`` (``self.model(x)``), through local names and comprehension variables."""
    if depth > 4:
        return False
    scope = ctx.scope(fn)
    for n in walk(e):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                dotted(n.func.value) == "self":
            k = ctx.analysis.kind_in(n.func, fn, line)
            if k is not None and k.what == MODULE:
                return True
        if not isinstance(n, ast.Name):
            continue
        gens = [g for c in comps for g in c.generators  # type: ignore[attr-defined]
                if any(isinstance(t, ast.Name) and t.id == n.id for t in walk(g.target))]
        if gens:
            if _from_submodule(gens[0].iter, fn, line, [], ctx, depth + 1):
                return True
            continue
        b = scope.binding_before(n.id, line)
        if b is not None and b.value is not None and b.line < line and \
                _from_submodule(b.value, fn, b.line, [], ctx, depth + 1):
            return True
    return False


class FreshLeafBandAid(Rule):
    """A value computed from tensors is made a new leaf that requires grad
    (`t.detach().clone().requires_grad_(True)`, `torch.tensor(x > 0.5, requires_grad=True)`)
    where nothing can ever read that leaf's gradient: it is an operand of the loss, or the
    result of a helper whose callers only compute with it.

    Why: the new leaf has no history; the loss term built from it is a constant to autograd.
    Its `requires_grad` only makes `backward()` stop raising `element 0 of tensors does not
    require grad and does not have a grad_fn`; no gradient reaches the model through the term
    and, when it is the whole loss, the model never trains (pyg-team/pytorch_geometric#3009,
    segmentation_models.pytorch#611; checked on torch 2.13). Compute the term from the tensor
    itself (without `.detach()`), or drop it if it cannot be differentiated. GT106 reports the
    same band-aid on a loss inside the function that calls `backward()`.
    A module's `forward` that re-leafs its own submodule's output (`[p.detach().requires_grad_()
    for p in self.net(x).chunk(2)]`, pytorch-forecasting#2208) cuts that submodule off, in a
    file that asks for no tensor's gradient. A value computed in a function and set on a
    module as `layer.weight = nn.Parameter(merged)` before the function runs a forward and
    returns its result (a weight-entangled NAS supernet's merged kernel) is the same new leaf:
    what `merged` was computed from gets no gradient (NOTE [parameter made mid-forward]).
    A loss that returns its terms re-made as leaves (`return [torch.tensor(sum(v) / len(v),
    requires_grad=True) for v in terms.values()]` in a weightless module's `forward`, a tuple
    of them from a function) is judged by its callers, in the file or the project: one hands
    it a model's output and backpropagates the result (NOTE [returned fresh leaves]).
    Known limits: a leaf bound to a name in the same function is left to GT106; a helper is
    followed only when the file calls it, by name or on `self`.
    """

    code = "GT119"
    name = "fresh-leaf-band-aid"
    message = ("`{expr}` makes a new leaf that requires grad from a copy of `{cut}`, and "
               "nothing can read "
               "its gradient{where}: the term it builds is a constant to autograd and the model "
               "gets no gradient through it; compute it from the tensor itself")
    triggers = ("requires_grad", "Parameter(")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def edge_loss(h, pairs):
                total = 0
                for a, b in pairs:
                    total = total - torch.dot(h[a], h[b]).detach().requires_grad_(True)
                return total / len(pairs)

            def step(model, x, pairs):
                edge_loss(model(x), pairs).backward()
            """, at=(6, 24)),
        Bad("""
            import torch

            def hard(x, t):
                return torch.tensor((x > t).float(), requires_grad=True)

            def dice(pred, target):
                p = hard(pred, 0.5)
                return 1 - 2 * (p * target).sum() / (p.sum() + target.sum())

            def step(model, x, y):
                dice(model(x), y).backward()
            """, at=(4, 11)),
        Good("""
            import torch

            def perturb(model, x, y, loss_fn, eps):
                x_adv = x.detach().clone().requires_grad_(True)
                loss_fn(model(x_adv), y).backward()
                return x + eps * x_adv.grad.sign()
            """),
        Good("""
            import torch

            def leaf_copy(x):
                return x.detach().clone().requires_grad_(True)

            def saliency(model, x, label):
                inp = leaf_copy(x)
                model(inp)[0, label].backward()
                return inp.grad.abs()
            """),
        Bad("""
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(4, 4)

                def forward(self, x):
                    return [p.detach().requires_grad_() for p in self.enc(x).chunk(2, -1)]

            def step(net, x):
                sum(p.sum() for p in net(x)).backward()
            """, at=(9, 16)),
        Good("""
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 1)

                def forward(self, x):
                    self.feat = self.enc(x).detach().requires_grad_(True)
                    return self.head(self.feat)

            def cam(net, x):
                net(x).sum().backward()
                return net.feat.grad.abs()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.mentions(".backward(") and is_parameter_call(node, ctx):
            fwd = parameter_mid_forward(node, ctx)  # NOTE [parameter made mid-forward]
            if fwd is not None:
                yield self.report(node, ctx, related=[Related(
                    ctx.path, fwd.lineno, "the function runs this forward with it and returns "
                    "its result", ctx.column(fwd))], expr=excerpt(ctx.source(node)),
                    cut=excerpt(ctx.source(node.args[0])),
                    where=f" (`{excerpt(ctx.source(fwd))}` is run with it, line {fwd.lineno})")
            return
        cut = _fresh_leaf(node, ctx)
        if cut is None or ctx.scope().grad_off_at(node):
            return  # made under `torch.no_grad()`: no gradient was meant to flow through it
        parents = _parents(ctx)
        if not ctx.mentions(".backward("):  # a loss of a file its callers backpropagate
            loss = returned_leaf_fn(node, parents, ctx, _grad_wanted)
            if loss is not None:
                yield self.report(node, ctx, expr=excerpt(ctx.source(node)), cut=excerpt(
                    ctx.source(cut.value if isinstance(cut, ast.Attribute) else cut)),
                    where=f" (`{loss.name}` returns it as the loss)")
            return
        up = parents.get(id(node))
        while isinstance(up, ast.Attribute) and isinstance(parents.get(id(up)), ast.Call):
            node = parents[id(up)]  # `.float()`, `.to(...)` after it: the same values
            up = parents.get(id(node))
        where = ""
        related: list[Related] = []
        if isinstance(up, (ast.BinOp, ast.UnaryOp)):
            where = " (an operand of the expression)"
        elif isinstance(up, ast.Return) and ctx.function is not None and \
                (calls := _unreadable_result(ctx.function, ctx)) is not None:
            where = f" (`{ctx.function.name}` returns it and its callers only compute with it)"
            related = [Related(ctx.path, c.lineno, "its result is used here", ctx.column(c))
                       for c in calls[:3]]
        elif _forward_leaf(node, cut, up, ctx):
            where = (" (`forward` builds its output from it, and the file never asks for a "
                     "gradient)")
        elif (loss := returned_leaf_fn(node, parents, ctx, _grad_wanted)) is not None:
            where = f" (`{loss.name}` returns it as the loss)"  # NOTE [returned fresh leaves]
        else:
            return
        yield self.report(node, ctx, related=related, expr=excerpt(ctx.source(node)),
                          cut=excerpt(ctx.source(cut.value if isinstance(cut, ast.Attribute)
                                                else cut)), where=where)
