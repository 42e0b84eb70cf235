"""Whether a loss is scaled for gradient accumulation (GT513, :mod:`.micro_steps`): a plain
``loss.backward()``, a loss divided or multiplied in the loop, a divisor used in a division,
multiplication or call; whether the optimizer ignores the sum's scale. Holds no rule."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.optimizer_classes import optimizer_classes
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, Step

SCALING_OPS = (ast.Div, ast.Mult, ast.FloorDiv)
SCALING_METHODS = frozenset({"div", "div_", "mul", "mul_", "true_divide", "divide",
                             "multiply"})


def _plain_backward(b: Backward) -> bool:
    """``loss.backward()`` or ``scaler.scale(loss).backward()`` (nothing else scales it)."""
    func = b.call.func
    return isinstance(func, ast.Attribute) and func.attr == "backward" and not b.call.args \
        and b.loss is not None and b.inputs is None


def _scales(node: ast.AST) -> bool:
    for n in walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, SCALING_OPS):
            return True
        if isinstance(n, ast.AugAssign) and isinstance(n.op, SCALING_OPS):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in SCALING_METHODS:
            return True
    return False


def _scaled_loss(f: LoopFacts, b: Backward, loop: ast.stmt) -> bool:
    """The loss, or a binding it is computed from inside the loop, is divided or multiplied
    (also by a later ``loss /= n``)."""
    if _scales(b.loss):  # type: ignore[arg-type]
        return True
    name = dotted(b.loss)  # type: ignore[arg-type]
    if name and any(isinstance(x.stmt, ast.AugAssign) and isinstance(x.stmt.op, SCALING_OPS)
                    for x in f.scope.bindings.get(name, ())):
        return True
    deps = graphs(f.scope).deps(b.loss, b.stmt.lineno)  # type: ignore[arg-type]
    return any(f.inside(d.stmt, loop) and isinstance(d.stmt, (ast.Assign, ast.AnnAssign,
                                                              ast.AugAssign))
               and _scales(d.stmt) for d in deps.bindings)


def _scaled_by(f: LoopFacts, divisors: set[str | None], ctx: Context,
               counter: ast.AST | None = None) -> bool:
    """The remainder's divisor is used in a division, multiplication or call of the function
    (``loss / accum``, ``model(x, accum_steps=accum)``); a ``self.<attr>`` divisor anywhere in
    the class (``compute_loss`` returning ``loss / self.accum_steps``) or in a subclass of
    the file (NOTE [template-method scaling])."""
    where: list[ast.AST] = [f.node]
    if any(d and d.startswith("self.") for d in divisors):
        info = ctx.analysis.class_of(f.node)
        where = [info.node, *_subclasses(ctx, info.node)] if info is not None else where
    for n in (n for w in where for n in walk(w)):
        if isinstance(n, ast.BinOp) and isinstance(n.op, SCALING_OPS):
            parts = (n.left, n.right)
        elif isinstance(n, ast.AugAssign) and isinstance(n.op, SCALING_OPS):
            parts = (n.value,)
        elif isinstance(n, ast.Call) and n is not counter:  # not the micro-step `range(n)`
            parts = (*n.args, *(k.value for k in n.keywords))
        else:
            continue
        if any(dotted(x) in divisors for p in parts for x in walk(p)):
            return True
    return False


def _subclasses(ctx: Context, cls: ast.ClassDef) -> list[ast.ClassDef]:
    """# NOTE [template-method scaling]
    The classes of the file deriving from ``cls``, at any depth. A base trainer's loop
    (``loss = self.forward_propagation(batch, model)``, an abstract method) runs in the
    subclasses that fill in the method: UER-py's ``MlmTrainer.forward_propagation`` returns
    ``loss / self.accumulation_steps``; a ``self.<attr>`` divisor scaled there is scaled for
    the inherited loop too."""
    names, out, grew = {cls.name}, [], True
    classes = [n for n in walk(ctx.tree) if isinstance(n, ast.ClassDef)]
    while grew:
        grew = False
        for c in classes:
            if c.name not in names and any(dotted(b) in names for b in c.bases):
                names.add(c.name)
                out.append(c)
                grew = True
    return out


# NOTE [scale-free update]
# Adam, Adamax, NAdam, RAdam, RMSprop and Adagrad divide each gradient by a running root of
# its own square: a gradient k times larger moves the weights the same (up to `eps`). An
# unscaled sum of k micro-batches then changes nothing, unless something reads the gradient's
# size: a coupled `weight_decay` (added to the gradient before the division: its share shrinks
# k-fold; AdamW decouples it) or a clip between the backward and the step (its bound is met k
# times sooner). Any other optimizer, or one the code does not show, keeps the finding; one
# looked up by a string counts when every class its keywords allow is scale-free
# (NOTE [optimizer named by a string]).
SCALE_FREE = frozenset({"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad"})
DECOUPLED = frozenset({"AdamW"})


def scale_free(f: LoopFacts, s: Step) -> bool:
    """Whether the optimizer ``s`` steps ignores a uniform scale of the gradient and nothing
    in the function clips the gradient (NOTE [scale-free update])."""
    if f.clips:
        return False
    func = s.call.func
    expr = (s.call.args[0] if s.call.args else None) if s.scaler is not None else (
        func.value if isinstance(func, ast.Attribute) else None)
    if expr is None:
        return False
    k = f.ctx.analysis.kind(expr, f.scope, s.call.lineno)
    built = k.node if k is not None and k.what == OPTIMIZER else None
    if built is None and (name := dotted(expr)) is not None:  # `getattr(torch.optim, n)(...)`
        b = f.scope.binding_before(name, s.call.lineno)
        built = b.value if b is not None else None
    kinds = optimizer_classes(built, f.ctx) if built is not None else None
    if not kinds or not kinds <= SCALE_FREE:
        return False
    return kinds <= DECOUPLED or not any(
        (isinstance(n, ast.keyword) and n.arg == "weight_decay" and not _zero(n.value))
        or (isinstance(n, ast.Dict) and any(
            isinstance(key, ast.Constant) and key.value == "weight_decay" and not _zero(v)
            for key, v in zip(n.keys, n.values)))
        for n in ast.walk(built))


def _zero(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value in (0, 0.0)
