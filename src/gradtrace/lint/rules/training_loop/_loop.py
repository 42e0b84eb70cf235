"""The training-loop facts of one function that the GT5xx rules share.

:class:`LoopFacts` lists, for one function (or the module body), the calls that matter to a
training step — backward, optimizer step, ``zero_grad``, gradient clipping — with their
statements, and answers ordering questions about statements: "does ``a`` run before ``b``
in the same pass through their common block" (:meth:`LoopFacts.before`).

# NOTE [statement order]
Statements are placed by their *path*: the chain of (enclosing statement, body field, index)
from the function down. Two statements are ordered only when their paths part inside the same
body list (same parent, same field): then the lower index runs first, unless a ``return`` /
``raise`` / ``continue`` / ``break`` between them (or after ``a`` in one of ``a``'s own
blocks) can skip ``b``. Statements in the two branches of an ``if``, or in ``try`` and its
``except``, are never ordered. This keeps every ordering claim true on every path.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.context import FUNCTION_TYPES, LOOP_TYPES
from gradtrace.lint.flow import MODULE, OPTIMIZER
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Path = tuple[tuple[int, str, int], ...]
JUMPS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
OPT_RE = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)(s|_?[a-z0-9]{1,4})?($|_)")
SCALER_RE = re.compile(r"scaler")
# receivers whose `.backward(x)` takes the loss as an argument (accelerate, fabric, deepspeed)
BACKWARD_OWNER_RE = re.compile(r"accelerator|fabric|engine|trainer|strategy|^self$|ds_model")
CLIP_FUNCS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm",
                        "clip_grad_value", "clip_gradients"})
# text meaning "gradients are cleared here" besides zero_grad()
MANUAL_ZERO_RE = re.compile(
    r"zero_grad|\.grad\s*=[^=]|\.grad\.(?:data\.)?(?:zero_|detach_|fill_|mul_)|set_to_none"
    r"|(?:clear|reset|zero|free)_?grad|grad_?(?:clear|reset|zero)", re.IGNORECASE)


def optimizer_like(name: str | None, scope: Scope | None = None, line: int = 0) -> bool:
    """Whether a dotted receiver names an optimizer (by its binding, else by its spelling)."""
    if not name:
        return False
    if scope is not None:
        b = scope.binding_before(name, line or 10 ** 9)
        if b is not None and b.kind == OPTIMIZER:
            return True
    last = name.rpartition(".")[2]
    low = last.lower()
    if low.startswith("option"):
        return False
    return bool(OPT_RE.search(low)) or bool(re.match(r"opt[A-Z]", last))


@dataclass(frozen=True)
class Backward:
    """A call that runs backward: ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``, ``self.manual_backward(loss)``, ``torch.autograd.grad``."""

    call: ast.Call
    stmt: ast.stmt
    loss: ast.expr | None      # the differentiated value
    retains: bool              # retain_graph/create_graph given (or not a constant False)
    accumulates: bool          # fills .grad (False for torch.autograd.grad)
    inputs: ast.expr | None = None  # `inputs=`: the pass stops there (NOTE [grad inputs])


@dataclass(frozen=True)
class Step:
    """``opt.step()`` / ``scaler.step(opt)``: which optimizer, and whether a closure is passed."""

    call: ast.Call
    stmt: ast.stmt
    optimizer: str
    closure: bool


@dataclass(frozen=True)
class Named:
    """A call of interest with the dotted spelling of its receiver (zero_grad, clip)."""

    call: ast.Call
    stmt: ast.stmt
    receiver: str


def _retains(call: ast.Call, positional: tuple[int, ...]) -> bool:
    for kw in call.keywords:
        if kw.arg in ("retain_graph", "create_graph") or kw.arg is None:
            if not (isinstance(kw.value, ast.Constant) and kw.value.value in (False, None)):
                return True
    for i in positional:
        if len(call.args) > i:
            a = call.args[i]
            if not (isinstance(a, ast.Constant) and a.value in (False, None)):
                return True
    return False


def backward_of(call: ast.Call, ctx: Context) -> Backward | None:
    """The :class:`Backward` that ``call`` is, or None.

    Its ``stmt`` is left None here; :class:`LoopFacts` records the enclosing statement.
    """
    func = call.func
    qual = ctx.qualified_name(func) or ""
    if qual in ("torch.autograd.grad", "torch.autograd.backward"):
        loss = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg in ("outputs", "tensors")), None)
        grad = qual.endswith("grad")
        pos = (3, 4) if grad else (2, 3)
        inputs = call.args[1] if grad and len(call.args) > 1 else _keyword(call, "inputs")
        return Backward(call, None, loss, _retains(call, pos),  # type: ignore[arg-type]
                        not grad, inputs)
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "manual_backward":
        return Backward(call, None, call.args[0] if call.args else None,  # type: ignore[arg-type]
                        _retains(call, ()), True)
    if func.attr != "backward":
        return None
    inputs = _keyword(call, "inputs")
    recv = func.value
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
            and recv.func.attr == "scale" and recv.args:
        return Backward(call, None, recv.args[0],  # type: ignore[arg-type]
                        _retains(call, (1, 2)), True, inputs)
    owner = dotted(recv)
    if owner and BACKWARD_OWNER_RE.search(owner.rpartition(".")[2].lower()):
        return Backward(call, None, call.args[0] if call.args else None,  # type: ignore[arg-type]
                        _retains(call, ()), True)
    return Backward(call, None, recv, _retains(call, (1, 2)), True,  # type: ignore[arg-type]
                    inputs)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def step_of(call: ast.Call, scope: Scope, line: int) -> tuple[str, bool] | None:
    """(optimizer spelling, has closure) when ``call`` steps an optimizer."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    recv = dotted(func.value)
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
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, ast.AST):
                for n in walk(v):
                    if isinstance(n, ast.Call):
                        yield n


class LoopFacts:
    """Backward/step/zero_grad/clip calls of one function and the order of its statements."""

    def __init__(self, node: ast.AST, ctx: Context) -> None:
        self.node = node
        self.ctx = ctx
        self.scope = ctx.scope(node)
        self.paths: dict[int, Path] = {}
        self.blocks: dict[tuple[int, str], list[ast.stmt]] = {}
        self._jump_counts: dict[tuple[int, str], list[int]] = {}
        self.backwards: list[Backward] = []
        self.steps: list[Step] = []
        self.zero_grads: list[Named] = []
        self.clips: list[Named] = []
        body = getattr(node, "body", [])
        self._index(body, (), (id(node), "body"))
        for s in self.scope.stmts:
            for call in calls_in(s):
                self._classify(call, s)

    def _index(self, body: list[ast.stmt], path: Path, key: tuple[int, str]) -> None:
        self.blocks[key] = body
        for i, s in enumerate(body):
            p = path + ((key[0], key[1], i),)
            self.paths[id(s)] = p
            if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(s, field, None)
                if sub and isinstance(sub, list):
                    self._index(sub, p, (id(s), field))
            for j, h in enumerate(getattr(s, "handlers", ())):
                self._index(h.body, p, (id(s), f"handlers{j}"))
            for j, c in enumerate(getattr(s, "cases", ())):
                self._index(c.body, p, (id(s), f"cases{j}"))

    def _classify(self, call: ast.Call, s: ast.stmt) -> None:
        func = call.func
        b = backward_of(call, self.ctx)
        if b is not None:
            self.backwards.append(Backward(call, s, b.loss, b.retains, b.accumulates, b.inputs))
            return
        st = step_of(call, self.scope, s.lineno)
        if st is not None:
            self.steps.append(Step(call, s, st[0], st[1]))
            return
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        recv = dotted(func.value) if isinstance(func, ast.Attribute) else ""
        if name == "zero_grad":
            self.zero_grads.append(Named(call, s, recv or ""))
        elif name in CLIP_FUNCS:
            self.clips.append(Named(call, s, recv or ""))

    # -- structure -------------------------------------------------------------------------
    def loops_of(self, s: ast.stmt) -> tuple[ast.stmt, ...]:
        return self.scope.loops.get(id(s), ())

    def inside(self, s: ast.stmt, outer: ast.stmt) -> bool:
        """``s`` is ``outer`` or nested in it."""
        ps, po = self.paths.get(id(s)), self.paths.get(id(outer))
        return ps is not None and po is not None and ps[:len(po)] == po

    def innermost_loop(self, *stmts: ast.stmt) -> ast.stmt | None:
        """The innermost loop enclosing all ``stmts`` (None: not all in one loop)."""
        common: ast.stmt | None = None
        for loop in self.loops_of(stmts[0]):
            if all(loop in self.loops_of(s) for s in stmts[1:]):
                common = loop
        return common

    def before(self, a: ast.stmt, b: ast.stmt) -> bool:
        """``a`` runs, then ``b`` runs, in one pass through their common block.

        See NOTE [statement order].
        """
        pa, pb = self.paths.get(id(a)), self.paths.get(id(b))
        if pa is None or pb is None:
            return False
        k = 0
        while k < len(pa) and k < len(pb) and pa[k] == pb[k]:
            k += 1
        if k == len(pa) or k == len(pb):
            return False
        (ida, fa, ia), (idb, fb, ib) = pa[k], pb[k]
        if (ida, fa) != (idb, fb) or ia >= ib:
            return False
        jumps = self._jumps((ida, fa))
        if jumps[ib] - jumps[ia + 1]:
            return False
        for j in range(k + 1, len(pa)):
            pid, f, i = pa[j]
            jumps = self._jumps((pid, f))
            if jumps[-1] - jumps[i + 1]:
                return False
        return True

    def _jumps(self, key: tuple[int, str]) -> list[int]:
        """Running count of the jumps (return, raise, continue, break) in a block: the jumps
        between two statements in one subtraction, not a scan (a script's module body holds
        thousands of statements)."""
        counts = self._jump_counts.get(key)
        if counts is None:
            counts = [0]
            for x in self.blocks[key]:
                counts.append(counts[-1] + isinstance(x, JUMPS))
            self._jump_counts[key] = counts
        return counts

    def dominates(self, a: ast.stmt, b: ast.stmt) -> bool:
        """``a`` runs before ``b`` whenever ``b`` runs (``a`` sits in a block enclosing ``b``)."""
        pa, pb = self.paths.get(id(a)), self.paths.get(id(b))
        if pa is None or pb is None or len(pa) > len(pb):
            return False
        return pa[:-1] == pb[:len(pa) - 1] and pa[-1][:2] == pb[len(pa) - 1][:2] \
            and pa[-1][2] < pb[len(pa) - 1][2] and self.before(a, b)

    def text(self, node: ast.AST) -> str:
        """Source lines of ``node`` (cheap: no tokenizing)."""
        lines = self.ctx.code_lines[node.lineno - 1:node.end_lineno]  # type: ignore[attr-defined]
        return "\n".join(lines)

    def loop_rebinds(self, loop: ast.stmt, names: set[str]) -> bool:
        """Whether ``loop`` (re)binds any of ``names`` (a fresh model/optimizer per pass);
        an inner ``for opt in optimizers:`` only walks existing ones and does not count."""
        for n in names:
            for b in self.scope.bindings.get(n, ()):
                if b.stmt is not loop and self.inside(b.stmt, loop) and \
                        not isinstance(b.stmt, LOOP_TYPES):
                    return True
        return False

    def module_like(self, name: str | None, line: int) -> bool:
        """Whether ``name`` is bound to an ``nn.Module`` here or at module level."""
        if not name:
            return False
        for scope in (self.scope, self.ctx.scope(self.ctx.tree)):
            b = scope.binding_before(name, line)
            if b is not None:
                return b.kind == MODULE
        return False


def _owners(f: LoopFacts, expr: ast.AST | None, line: int) -> frozenset[str]:
    """The dotted owners of the parameters an optimizer expression was built over (empty:
    not known to be an optimizer, or over something we cannot name)."""
    if expr is None:
        return frozenset()
    k = f.ctx.analysis.kind(expr, f.scope, line)
    return k.over if k is not None and k.what == OPTIMIZER else frozenset()


def _disjoint(a: frozenset[str], b: frozenset[str]) -> bool:
    """No owner of ``a`` is, contains or is contained in an owner of ``b``."""
    return all(x != y and not x.startswith(y + ".") and not y.startswith(x + ".")
               for x in a for y in b)


def _stepped_expr(s: Step) -> ast.AST | None:
    func = s.call.func
    if isinstance(func, ast.Attribute) and func.attr == "step" and not (
            s.call.args and dotted(s.call.args[0]) == s.optimizer):
        return func.value
    return s.call.args[0] if s.call.args else None


def uncleared_optimizers(f: LoopFacts, text: str) -> set[str]:
    """The optimizers stepped here that no gradient clearing of ``text`` can reach.

    # NOTE [one optimizer never cleared]
    A GAN or encoder/discriminator loop that clears one optimizer (``opt_e.zero_grad()``) but
    steps another that is never cleared (``opt_d.step()``) adds up the second one's gradients
    all the same. Said only when every clearing word of the text is a ``zero_grad()`` call of
    an optimizer whose parameters are known (``torch.optim.X(E.parameters())``) and share no
    owner with the stepped optimizer's (known too); a module's ``zero_grad()``, a
    ``.grad = None``, a helper that clears: the stepped optimizer is taken as cleared."""
    if len(MANUAL_ZERO_RE.findall(text)) != len(f.zero_grads):
        return set()
    cleared: list[frozenset[str]] = []
    for z in f.zero_grads:
        func = z.call.func
        over = _owners(f, func.value if isinstance(func, ast.Attribute) else None,
                       z.call.lineno)
        if not over:
            return set()
        cleared.append(over)
    out: set[str] = set()
    for s in f.steps:
        over = _owners(f, _stepped_expr(s), s.call.lineno)
        if over and all(_disjoint(over, c) for c in cleared):
            out.add(s.optimizer)
    return out


def facts(ctx: Context, node: ast.AST) -> LoopFacts:
    """The (cached) :class:`LoopFacts` of a function or module node."""
    return ctx.memo("gt5-loop", node, lambda: LoopFacts(node, ctx))


def loop_types() -> tuple[type, ...]:
    return LOOP_TYPES
