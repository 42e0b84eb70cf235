"""The training step's calls, recognised once: backward, optimizer step, ``zero_grad``, clip.

# NOTE [backward callers]
One recogniser (:func:`backward_of`) says which calls run backward and what they
differentiate, for every rule family: ``loss.backward()``, ``scaler.scale(loss).backward()``,
``self.manual_backward(loss)``, ``torch.autograd.backward(loss)`` / ``torch.autograd.grad(out,
inputs)``, and ``owner.backward(loss)`` where the owner runs backward for the loss it is given
(accelerate, fabric, DeepSpeed engines, Lightning strategies and trainers, an optimizer that
scales the loss itself such as apex's ``FP16_Optimizer``, ``self`` of a module that wraps them,
an imported module such as ``dist_autograd``): known from its constructor when the file binds
the name only to ``Accelerator()``/``Fabric()`` (``acc = Accelerator()``), else from its
spelling. :func:`step_calls` lists them,
with the optimizer steps, ``zero_grad`` and gradient-clipping calls, per function (cached).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.manual_backwards import manual_backward_owners
from gradtrace.lint.analysis.vocabulary import BACKWARD_OWNER_CLASSES
from gradtrace.lint.analysis.used_backwards import used_backwards
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import BODY_FIELDS, of_types

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

OPT_RE = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)(s|_?[a-z0-9]{1,4})?($|_)")
SCALER_RE = re.compile(r"scaler")
# receivers whose `.backward(x)` takes the loss as an argument (accelerate, fabric, deepspeed,
# Lightning); one part of the receiver's dotted name (`self.accelerator`, `model_engine`)
BACKWARD_OWNER_RE = re.compile(r"accelerator|fabric|engine|trainer|strategy|ds_model")
CLIP_FUNCS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm",
                        "clip_grad_value", "clip_gradients"})


def optimizer_like(name: str | None, scope: Scope | None = None, line: int = 0) -> bool:
    """Whether a dotted receiver names an optimizer (by its binding, else by its spelling)."""
    if not name:
        return False
    if scope is not None:
        b = scope.binding_before(name, line or 10 ** 9)
        if b is not None and b.kind == OPTIMIZER:
            return True
        if b is None and "." not in name and _cleared_and_stepped(scope, name):
            return True  # `trainer.zero_grad()` ... `trainer.step()`: what an optimizer does
    last = name.partition("[")[0].rpartition(".")[2]  # `self.optimizer['actor']`: its holder
    low = last.lower()
    if low.startswith("option"):
        return False
    return bool(OPT_RE.search(low)) or bool(re.match(r"opt[A-Z]", last))


def _cleared_and_stepped(scope: Scope, name: str) -> bool:
    """A name the function does not bind (a parameter, d2l's ``trainer``) on which it calls
    both ``zero_grad()`` and an argument-free ``step()``: torch's optimizers have both, a
    module has no ``step``, a scheduler no ``zero_grad``."""
    return any(m.receiver == name and not m.call.args and not m.call.keywords
               for m in scope.calls_to("step")) and any(
        m.receiver == name for m in scope.calls_to("zero_grad"))


@dataclass(frozen=True)
class Backward:
    """A call that runs backward: ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``, ``self.manual_backward(loss)``, ``torch.autograd.grad``."""

    call: ast.Call
    stmt: ast.stmt
    loss: ast.expr | None      # the differentiated value
    retains: bool              # retain_graph/create_graph given (or not a constant False; the
    #                            old retain_variables too: meant to retain, GT723 reports it)
    accumulates: bool          # fills .grad (False for torch.autograd.grad)
    inputs: ast.expr | None = None  # `inputs=`: the pass stops there (NOTE [grad inputs])
    scaler: str | None = None  # `scaler.scale(loss).backward()`: the scaler's spelling


@dataclass(frozen=True)
class Step:
    """``opt.step()`` / ``scaler.step(opt)``: which optimizer, and whether a closure is passed."""

    call: ast.Call
    stmt: ast.stmt
    optimizer: str
    closure: bool
    scaler: str | None = None  # `scaler.step(opt)`: the scaler's spelling


@dataclass(frozen=True)
class Named:
    """A call of interest with the dotted spelling of its receiver (zero_grad, clip)."""

    call: ast.Call
    stmt: ast.stmt
    receiver: str


def _retains(call: ast.Call, positional: tuple[int, ...]) -> bool:
    for kw in call.keywords:
        if kw.arg in ("retain_graph", "create_graph", "retain_variables") or kw.arg is None:
            if not (isinstance(kw.value, ast.Constant) and kw.value.value in (False, None)):
                return True
    for i in positional:
        if len(call.args) > i:
            a = call.args[i]
            if not (isinstance(a, ast.Constant) and a.value in (False, None)):
                return True
    return False


def backward_owner(owner: str | None, ctx: Context) -> bool:
    """``owner.backward(loss)`` differentiates its argument (NOTE [backward callers]); an
    optimizer's ``backward(loss)`` (apex's ``FP16_Optimizer``, fairseq's and Megatron's
    optimizers scale the loss and run its backward) is such an owner."""
    if not owner:
        return False
    parts = owner.lower().split(".")
    return owner == "self" or parts[-1] == "amp" or optimizer_like(owner) or \
        owner.partition(".")[0] in ctx.imports.aliases or any(
            BACKWARD_OWNER_RE.search(p) for p in parts if p != "self") \
        or owner in _built_owners(ctx)


def _built_owners(ctx: Context) -> frozenset[str]:
    """The dotted names the file binds only to an instance of a class whose ``backward(loss)``
    differentiates its argument (``acc = Accelerator()``, ``self.fab = Fabric(...)``:
    :data:`~.vocabulary.BACKWARD_OWNER_CLASSES`), read from the constructor, not the name."""
    def make() -> frozenset[str]:
        made: dict[str, bool] = {}
        for n in ast.walk(ctx.tree):
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    d = dotted(t)
                    if d:
                        v = n.value
                        made[d] = made.get(d, True) and isinstance(v, ast.Call) and (
                            ctx.qualified_name(v.func) or "") in BACKWARD_OWNER_CLASSES
        return frozenset(d for d, ok in made.items() if ok)

    def spelt() -> frozenset[str]:
        # the text test once per file too: asked at every backward call, it scanned the whole
        # code once per class there (quadratic in the file on generated training code)
        if ".backward(" not in ctx.code or not any(
                q.rpartition(".")[2] in ctx.code for q in BACKWARD_OWNER_CLASSES):
            return frozenset()  # (only spares the walk: the constructor decides)
        return make()
    return ctx.memo("built-backward-owners", ctx.tree, spelt)


def _own_owners(ctx: Context) -> frozenset[str]:
    """The names (``mpm``, ``self.amp``) the file binds to an instance of a class of the
    project whose own ``backward(self, loss, ...)`` method takes the loss (ColBERT's
    ``MixedPrecisionManager``, a mixed-precision or distributed helper of another file):
    ``mpm.backward(loss)`` differentiates ``loss``, not ``mpm`` (NOTE [backward callers])."""
    def make() -> frozenset[str]:
        from gradtrace.lint.analysis.built_classes import built_class
        out: set[str] = set()
        for n in ast.walk(ctx.tree):
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1
                    and isinstance(n.value, ast.Call)):
                continue
            name = dotted(n.targets[0])
            got = built_class(ctx, n.value) if name else None
            m = next((c.methods["backward"] for c in got[1].lineage()
                      if "backward" in c.methods), None) if got is not None else None
            if m is not None and not m.decorator_list and len(m.args.args) >= 2 \
                    and not got[1].is_module:  # type: ignore[index]
                out.add(name)  # type: ignore[arg-type]
        return frozenset(out)
    if ".backward(" not in ctx.code:
        return frozenset()
    return ctx.memo("own-backward-owners", ctx.tree, make)


def backward_of(call: ast.Call, ctx: Context, stmt: ast.stmt | None = None) -> Backward | None:
    """The :class:`Backward` that ``call`` is, or None (NOTE [backward callers])."""
    func = call.func
    if isinstance(func, ast.Attribute):
        attr = func.attr
        if attr not in ("backward", "manual_backward", "grad"):
            return None
    elif not isinstance(func, ast.Name):
        return None
    qual = ctx.qualified_name(func) or ""
    if qual in ("torch.autograd.grad", "torch.autograd.backward"):
        loss = call.args[0] if call.args else _keyword(call, "outputs") or \
            _keyword(call, "tensors")
        grad = qual.endswith("grad")
        pos = (3, 4) if grad else (2, 3)
        inputs = call.args[1] if grad and len(call.args) > 1 else _keyword(call, "inputs")
        return Backward(call, stmt, loss, _retains(call, pos),  # type: ignore[arg-type]
                        not grad, inputs)
    if not isinstance(func, ast.Attribute):
        return None
    if attr == "manual_backward":
        return Backward(call, stmt, call.args[0] if call.args else None,  # type: ignore[arg-type]
                        _retains(call, ()), True)
    if attr != "backward":
        return None
    inputs = _keyword(call, "inputs")
    recv = func.value
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
            and recv.func.attr == "scale" and recv.args:
        return Backward(call, stmt, recv.args[0],  # type: ignore[arg-type]
                        _retains(call, (1, 2)), True, inputs, dotted(recv.func.value))
    if dotted(recv) in manual_backward_owners(ctx):
        return None  # a plain class's own `backward` (NOTE [manual backward])
    if id(call) in used_backwards(ctx):
        return None  # its result used: NOTE [backward result used]
    if backward_owner(dotted(recv), ctx) or call.args and dotted(recv) in _own_owners(ctx):
        return Backward(call, stmt, call.args[0] if call.args else None,  # type: ignore[arg-type]
                        _retains(call, ()), True)
    return Backward(call, stmt, recv, _retains(call, (1, 2)), True,  # type: ignore[arg-type]
                    inputs)


def backward_loss(call: ast.Call, ctx: Context) -> ast.expr | None:
    """What a call that fills ``.grad`` differentiates (None: not such a call)."""
    b = backward_of(call, ctx)
    return b.loss if b is not None and b.accumulates else None


GRAD_FUNCS = frozenset({"torch.autograd.grad", "autograd.grad"})


def plain_grads(call: ast.Call) -> bool:
    """``torch.autograd.grad(loss, params)`` without ``create_graph``: the gradients it returns
    are new tensors without history (first-order MAML's ``fast = p - lr * g`` does not run
    through the graph of ``loss``)."""
    if dotted(call.func) not in GRAD_FUNCS or len(call.args) > 4:
        return False
    return all(kw.arg is not None and (kw.arg != "create_graph" or (
        isinstance(kw.value, ast.Constant) and kw.value.value in (False, None)))
        for kw in call.keywords)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def spelled(node: ast.AST) -> str | None:
    """The dotted spelling of a receiver, also of one entry of a container by a constant key
    (``self.optimizer['actor']``, NOTE [optimizers by key]): the steps and clears of each
    entry are told apart like those of optimizers held under their own names."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, (str, int)) and (base := dotted(node.value)):
        return f"{base}[{node.slice.value!r}]"
    return dotted(node)


# NOTE [optimizers by key]: RL and GAN learners keep one optimizer per part in a dict
# (``self.optimizer = {'model': Adam(...), 'actor': Adam(...), 'critic': Adam(...)}``) and step
# ``self.optimizer['actor'].step()``: each entry is an optimizer of its own, spelled with its
# key (xuance's Dreamer learners: the world model's, the actor's and the critic's steps).
def step_of(call: ast.Call, scope: Scope, line: int) -> tuple[str, bool] | None:
    """(optimizer spelling, has closure) when ``call`` steps an optimizer."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    recv = spelled(func.value)
    if func.attr == "step" and recv:
        if SCALER_RE.search(recv.rpartition(".")[2].lower()) and call.args:
            opt = dotted(call.args[0])
            return (opt, False) if opt else None
        if optimizer_like(recv, scope, line):
            closure = bool(call.args) or any(k.arg == "closure" for k in call.keywords)
            return recv, closure
    if func.attr == "optimizer_step" and call.args and dotted(call.args[0]):
        return dotted(call.args[0]), False  # type: ignore[return-value]
    return None


def calls_in(stmt: ast.stmt) -> Iterator[ast.Call]:
    """Calls in a statement's own expressions (not in its nested body statements)."""
    for field in stmt._fields:  # ast.iter_fields without its generator
        value = None if field in BODY_FIELDS else getattr(stmt, field, None)
        for v in value if value.__class__ is list else (value,):
            if isinstance(v, ast.AST):
                yield from of_types(v, (ast.Call,))  # type: ignore[misc]


class StepCalls:
    """Backward/step/zero_grad/clip calls of one function (or module body), in source order."""

    def __init__(self, node: ast.AST, ctx: Context) -> None:
        self.backwards: list[Backward] = []
        self.steps: list[Step] = []
        self.zero_grads: list[Named] = []
        self.clips: list[Named] = []
        # the GradScaler protocol's other calls: `scaler.unscale_(opt)`, `scaler.update()`
        # (any receiver: rules match them to the scaler of a backward or step)
        self.unscales: list[Named] = []
        self.updates: list[Named] = []
        scope = ctx.scope(node)
        for s in scope.stmts:
            own = scope.own_calls(s)  # the scope's expression walk, shared
            for call in calls_in(s) if own is None else own:
                self._classify(call, s, scope, ctx)

    def _classify(self, call: ast.Call, s: ast.stmt, scope: Scope, ctx: Context) -> None:
        func = call.func
        b = backward_of(call, ctx, s)
        if b is not None:
            self.backwards.append(b)
            return
        st = step_of(call, scope, s.lineno)
        if st is not None:
            scaler = dotted(func.value) if isinstance(func, ast.Attribute) \
                and func.attr == "step" and st[0] != dotted(func.value) else None
            self.steps.append(Step(call, s, st[0], st[1], scaler))
            return
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        recv = spelled(func.value) if isinstance(func, ast.Attribute) else ""
        if name == "zero_grad":
            self.zero_grads.append(Named(call, s, recv or ""))
        elif name in CLIP_FUNCS and not _measures_only(ctx, call):
            self.clips.append(Named(call, s, recv or ""))
        elif name == "unscale_" and recv:
            self.unscales.append(Named(call, s, recv))
        elif name == "update" and recv and not call.args and not call.keywords:
            self.updates.append(Named(call, s, recv))

    def losses(self) -> list[Backward]:
        """The backward calls that fill ``.grad`` and name what they differentiate."""
        return [b for b in self.backwards if b.accumulates and b.loss is not None]


def step_calls(ctx: Context, node: ast.AST) -> StepCalls:
    """The (cached) :class:`StepCalls` of the function or module ``node``."""
    return ctx.memo("steps", node, lambda: StepCalls(node, ctx))


def _measures_only(ctx: Context, call: ast.Call) -> bool:
    """A project's own clip function that, under this call's flags, writes no gradient
    (NOTE [clip flags])."""
    from gradtrace.lint.analysis.clip_calls import clips_nothing
    return clips_nothing(ctx, call)
