"""What tells a graph reused across passes (GT507, :class:`carried.GraphReusedAcrossSteps`) from a
harmless one: a plain helper or layer maker of the file, a value advanced on each pass, several
discriminator steps on one generated batch, a leaf or helper whose graph saves no tensor."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.graph_deps import Graphs
from gradtrace.lint.analysis.model_calls import model_calls, module_like
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.flow import Binding, MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rules.registration._optimizer_pairs import role
from gradtrace.lint.rules.training_loop._dists import caching_distributions
from gradtrace.lint.rules.training_loop._loop import LoopFacts

MODULE_ONLY = frozenset({"parameters", "named_parameters", "train", "eval", "state_dict"})


def _plain_helper(f: LoopFacts, g: Graphs, t: Binding, callee: str) -> bool:
    """``callee`` is a function of this file (``corr2d(X, K)``, spelled like a layer) whose
    body calls nothing module-like and whose arguments here are constants or names bound to a
    torch constructor's fresh tensor (``torch.ones(6, 8)``, no ``requires_grad``): its result
    has no history, however it is spelled."""
    fn = f.ctx.analysis.functions.get(callee)
    v = value_of(t)
    call = next((c for name, c in model_calls(v) if name == callee), None) if v else None
    if fn is None or call is None or call.keywords:
        return False
    inner = f.ctx.scope(fn)
    if any(module_like(f.ctx, inner, c, n.lineno) for s in fn.body
           for c, n in model_calls(s)):
        return False
    for a in call.args:
        if not isinstance(a, (ast.Name, ast.Constant)):
            return False
        if isinstance(a, ast.Name):
            b = f.scope.binding_before(a.id, t.line)
            v = value_of(b) if b is not None else None
            made = dotted(v.func) or "" if isinstance(v, ast.Call) else ""
            if not made.startswith("torch.") or _requires_grad_leaf(v) or g.carries(b) \
                    or any(k.arg == "requires_grad" for k in v.keywords):  # type: ignore[union-attr]
                return False
    return True


def _makes_layers(f: LoopFacts, t: Binding) -> bool:
    """``t`` is bound to the result of a function of this file whose every ``return`` gives
    back a list of new ``torch.nn`` layers (tab-ddpm's ``layers_D =
    determine_layers_disc(...)``: ``layers_D = []``, ``layers_D += [Conv2d(...), ...]``,
    ``return layers_D``), read later to build a model: layers hold no graph."""
    v = value_of(t)
    fn = f.ctx.analysis.functions.get(dotted(v.func) or "") if isinstance(v, ast.Call) else None
    if fn is None:
        return False
    rets = [r.value for r in bfs_walk(fn) if isinstance(r, ast.Return)]
    made: dict[str, list[ast.expr]] = {}
    for n in bfs_walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            made.setdefault(n.targets[0].id, []).append(n.value)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            made.setdefault(n.target.id, []).append(n.value)
    lists = [x for r in rets for x in (made.get(r.id, [None]) if isinstance(r, ast.Name)
                                       else [r])]
    return bool(lists) and all(isinstance(x, ast.List) and all(
        isinstance(e, ast.Call) and (f.ctx.qualified_name(e.func) or "").startswith(
            "torch.nn.") for e in x.elts) for x in lists)


DATA_TYPES = ("torch.utils.data.",)  # Dataset, IterableDataset, DataLoader, Subset...


def declared_data(f: LoopFacts, name: str) -> bool:
    """``name`` is a parameter of the function annotated with a type of
    ``torch.utils.data`` (``train_self_reward_dataset: Optional[Dataset] = None``), so every
    value it is given there, a rebinding in the function included, is a dataset or loader by
    its declaration: no tensor with a graph (self-rewarding-lm's ``DPOTrainer.forward`` binds
    it to what its dataset generator, an ``nn.Module``, returns)."""
    args = getattr(f.node, "args", None)
    if args is None:
        return False
    ann = next((a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if a.arg == name), None)
    while isinstance(ann, ast.Subscript):  # `Optional[Dataset]`, `Union[Dataset, None]`
        inner = ann.slice
        ann = next((e for e in inner.elts if not (isinstance(e, ast.Constant)
                                                   and e.value is None)), None) \
            if isinstance(inner, ast.Tuple) else inner
    return ann is not None and (f.ctx.qualified_name(ann) or "").startswith(DATA_TYPES)


def _advanced_each_pass(name: str, loop: ast.stmt) -> bool:
    """Every read of ``name`` in the loop is ``next(name)``: an iterator (a generator of
    forward passes) that yields a fresh value, with a fresh graph, on each pass."""
    reads = [n for n in bfs_walk(loop) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load)]
    nexts = [n for n in bfs_walk(loop) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "next" and n.args
             and isinstance(n.args[0], ast.Name) and n.args[0].id == name]
    return bool(reads) and len(reads) == len(nexts)


def _called(f: LoopFacts, name: str) -> bool:
    """``name`` is called in the function (``model(data)``), or a method only an
    ``nn.Module`` has (``model_con.parameters()``, tabsyn's CoDi) is: a model (ppnp's
    ``model = model_class(...).to(device)``), no tensor with a graph of its own."""
    def make() -> set[str]:
        return {n.func.id if isinstance(n.func, ast.Name) else n.func.value.id  # type: ignore
                for n in bfs_walk(f.node) if isinstance(n, ast.Call) and (
                    isinstance(n.func, ast.Name) or isinstance(n.func, ast.Attribute)
                    and n.func.attr in MODULE_ONLY and isinstance(n.func.value, ast.Name))}
    return name in f.ctx.memo("gt507-called", f.node, make)


def _discriminator_steps(f: LoopFacts, g: Graphs, t: Binding, loop: ast.stmt) -> bool:
    """Several discriminator steps on one generated batch (`fake = G(z)` before a loop that
    steps only the discriminator's optimizer): detaching the fake is the discriminator loss's
    job, often inside a loss callback this function cannot see; GT508 covers the visible case."""
    module = g.first_module_call(t)
    steps = [s for s in f.steps if f.inside(s.stmt, loop)]
    return module is not None and role(module) == "g" and bool(steps) and all(
        role(s.optimizer) == "d" for s in steps)


# operations whose backward reads saved tensors: a second backward through them raises
SAVING_FUNCS = frozenset({"mm", "matmul", "bmm", "einsum", "exp", "log", "pow", "sqrt",
                          "softmax", "log_softmax", "sigmoid", "tanh", "mul", "div", "linear",
                          "conv1d", "conv2d", "conv3d", "norm", "cross_entropy", "mse_loss"})


def _saving_ops(v: ast.AST) -> list[ast.AST]:
    """The operations in ``v`` whose backward reads saved tensors (``a @ b``, ``x.exp()``,
    ``torch.mm(a, b)``, ``a / b`` of two tensors); a slice, a sum or a scaling by a number
    saves nothing."""
    out: list[ast.AST] = []
    for n in bfs_walk(v):
        if isinstance(n, ast.BinOp) and (isinstance(n.op, ast.MatMult) or isinstance(
                n.op, (ast.Mult, ast.Div, ast.Pow)) and not isinstance(n.left, ast.Constant)
                and not isinstance(n.right, ast.Constant)):
            out.append(n)
        elif isinstance(n, ast.Call):
            f = n.func
            last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(
                f, ast.Name) else ""
            if last in SAVING_FUNCS:
                out.append(n)
    return out


def _requires_grad_leaf(v: ast.AST | None) -> bool:
    """``torch.randn(..., requires_grad=True)``, ``nn.Parameter(t)``, ``t.requires_grad_()``."""
    if not isinstance(v, ast.Call):
        return False
    if any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value
           is True for k in v.keywords):
        return True
    name = dotted(v.func) or ""
    return name.rpartition(".")[2] == "Parameter" or name.endswith(".requires_grad_") and not (
        v.args and isinstance(v.args[0], ast.Constant) and v.args[0].value is False)


def _leaf_graph(g: Graphs, t: Binding) -> str | None:
    """The requires-grad leaf ``t``'s value is computed from through a saving operation
    (``Y = torch.mm(X, true_W)``, ``loss = (xenc @ W).exp()...``), if any; a leaf that is an
    operand of the saving operation is named first."""
    v = value_of(t)
    if t.no_grad or v is None or _requires_grad_leaf(v):
        return None
    ops = _saving_ops(v) + caching_distributions(v, g.scope.ctx)  # `Bernoulli(p)`
    if not ops:
        return None
    leaves = [d.name for d in g.deps(v, t.line).bindings
              if not d.no_grad and _requires_grad_leaf(value_of(d))]
    operands = {n.id for op in ops for n in bfs_walk(op) if isinstance(n, ast.Name)}
    return next((x for x in leaves if x in operands), leaves[0] if leaves else None)


def _helper_graph(f: LoopFacts, t: Binding) -> str | None:
    """The same-file helper ``t``'s value calls whose ``return`` runs a module
    (``def embed(ids): return text_encoder(ids).mean(1)``), one call away."""
    v = value_of(t)
    if t.no_grad or v is None:
        return None
    helpers = f.ctx.analysis.functions
    for callee, _ in model_calls(v):
        fn = helpers.get(callee)
        if fn is not None and f.ctx.memo("gt507-helper", fn, lambda: _returns_module(f, fn)):
            return callee
    return None


def _returns_module(f: LoopFacts, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Some ``return`` of ``fn`` (outside no-grad) calls a name bound to an ``nn.Module``
    in ``fn`` or at module level."""
    scope = f.ctx.scope(fn)
    top = f.ctx.scope(f.ctx.tree)
    for s in scope.stmts:
        if not isinstance(s, ast.Return) or s.value is None or scope.grad_off_at(s) is not None:
            continue
        for callee, _ in model_calls(s.value):
            b = scope.binding_before(callee, s.lineno) or top.binding_before(callee, s.lineno)
            if b is not None and b.kind == MODULE:
                return True
    return False
