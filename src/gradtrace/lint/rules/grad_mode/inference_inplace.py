"""GT221: a tensor made under `inference_mode()` updated in place after the block."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.cuts import is_loss_callee
from gradtrace.lint.analysis.model_calls import calls_module
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import DETACHED, GRAPH, LEAF, NUMBER, Binding, Scope
from gradtrace.lint.grad_modes import grad_mode_of
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule

TENSOR_KINDS = frozenset({GRAPH, DETACHED, LEAF})
TENSOR_MODULES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg",
                            "torch.fft"})
ERROR = ("`RuntimeError: Inplace update to inference tensor outside InferenceMode is not "
         "allowed`")


class InferenceTensorUpdatedInPlace(Rule):
    """A tensor made under `torch.inference_mode()` is updated in place after the block.

    Why: every tensor created under `inference_mode` is an *inference tensor*; outside the
    block an in-place op on one (`t /= n`, `t += x`, `t.mul_(2)`, `t[i] = v`) raises
    `RuntimeError: Inplace update to inference tensor outside InferenceMode is not allowed`
    (pytorch-facts.md#inference-tensors, n4; verified on torch 2.13). This bites evaluation
    loops that sum a loss under `inference_mode` (`test_loss = 0`, then `test_loss +=
    loss_fn(pred, y)` in the block) and average it after the block (`test_loss /=
    len(loader)`). Average inside the block, write `t = t / n` (a new tensor), sum
    `.item()`s, or use `torch.no_grad()`.
    Known limits: the name must be bound in the block (an assignment, or `+=` onto a Python
    number) to a tensor whose kind is known (a torch op, a module or loss call), or to the
    tensor returned by a function of the file decorated with `inference_mode`; `+=` onto a
    tensor made before the block updates that normal tensor and is left alone (it stays a
    normal tensor).
    """

    code = "GT221"
    name = "inference-tensor-updated-in-place"
    message = ("`{stmt}` updates `{name}` in place outside `inference_mode`, but `{name}` is an "
               "inference tensor (made under `{mode}`, line {line}): this raises " + ERROR +
               "; {hint}")
    triggers = ("inference_mode",)
    examples = [
        Bad("""
            import torch

            def evaluate(model, loader, loss_fn):
                total = 0
                with torch.inference_mode():
                    for x, y in loader:
                        total += loss_fn(model(x), y)
                total /= len(loader)
                return total
            """, at=(8, 4)),
        Bad("""
            import torch

            @torch.inference_mode()
            def predict(net, x):
                return torch.sigmoid(net(x))

            def scores(net, x):
                probs = predict(net, x)
                probs.mul_(100)
                return probs
            """, at=(9, 4)),
        Good("""
            import torch

            def evaluate(model, loader, loss_fn):
                total = 0
                with torch.inference_mode():
                    for x, y in loader:
                        total += loss_fn(model(x), y)
                    total /= len(loader)
                acc = 0
                with torch.inference_mode():
                    for x, y in loader:
                        acc += (model(x).argmax(1) == y).float().mean().item()
                acc /= len(loader)
                return total
            """),
        Good("""
            import torch

            def evaluate(model, loader, loss_fn):
                total = torch.zeros(())
                with torch.inference_mode():
                    for x, y in loader:
                        total += loss_fn(model(x), y)
                total /= len(loader)
                return total
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        mode = next((it.context_expr for it in node.items
                     if grad_mode_of(it.context_expr, ctx.imports) == "inference"), None)
        if mode is None:
            return
        scope = ctx.scope()
        made: dict[str, Binding] = {}
        for s in _block(node.body):
            for b in _own_bindings(s, scope):
                if _makes_tensor(b, node, scope, ctx):
                    made[b.name] = b
                else:
                    made.pop(b.name, None)
        if made:
            yield from self._writes(made, node.end_lineno or node.lineno, mode, scope, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        """``probs = predict(x)`` of a function of the file decorated with inference_mode
        that returns a tensor, then ``probs.mul_(100)``."""
        call = node.value
        if not isinstance(call, ast.Call) or len(node.targets) != 1 or \
                not isinstance(node.targets[0], ast.Name):
            return
        f = call.func
        called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
            else None
        if called not in _decorated(ctx):
            return
        got = resolve(ctx, ctx.scope().node, call)
        fn = got[0] if got is not None else None
        if not isinstance(fn, FUNCTION_TYPES):
            return
        mode = next((d for d in fn.decorator_list
                     if grad_mode_of(d, ctx.imports) == "inference"), None)
        if mode is None or not _returns_tensor(fn, ctx):
            return
        scope = ctx.scope()
        b = next((x for x in scope.bindings.get(node.targets[0].id, ()) if x.stmt is node), None)
        if b is not None and not _under_inference(node, scope, ctx):
            yield from self._writes({b.name: b}, node.lineno, mode, scope, ctx)

    def _writes(self, made: dict[str, Binding], after: int, mode: ast.AST, scope: Scope,
                ctx: Context) -> Iterator[Finding]:
        for s in scope.stmts:
            if s.lineno <= after:
                continue
            hit = _in_place(s)
            if hit is None or hit[0] not in made:
                continue
            name, op = hit
            b = made[name]
            if scope.binding_before(name, s.lineno) is not b or scope.exclusive(b.stmt, s) \
                    or isinstance(s, ast.Assign) and _keyed(name, s, scope):
                continue
            if _under_inference(s, scope, ctx):
                continue
            del made[name]
            yield self.report(s, ctx, related=(Related(
                ctx.path, b.line, f"`{name}` is made here, under `{ctx.source(mode)}`",
                ctx.column(b.stmt)),), stmt=ctx.source(s).splitlines()[0], name=name,
                mode=ctx.source(mode), line=b.line,
                hint=(f"write `{name} = {name} {op} ...` (a new tensor)" if op else
                      "use the out-of-place op (a new tensor)") + ", or do it inside the block")


def _decorated(ctx: Context) -> frozenset[str]:
    """Names of the functions of the file decorated with ``inference_mode``."""
    return ctx.memo("gt221-decorated", ctx.tree, lambda: frozenset(
        n.name for n in of_types(ctx.tree, FUNCTION_TYPES) if any(
            grad_mode_of(d, ctx.imports) == "inference" for d in n.decorator_list)))


def _block(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` in order, into loops, ifs and withs (not into functions)."""
    for s in body:
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        yield s
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if isinstance(sub, list):
                yield from _block(sub)
        for h in getattr(s, "handlers", ()):
            yield from _block(h.body)


def _own_bindings(s: ast.stmt, scope: Scope) -> list[Binding]:
    if not isinstance(s, (ast.Assign, ast.AugAssign)):
        return []
    targets = s.targets if isinstance(s, ast.Assign) else [s.target]
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    return [b for n in names for b in scope.bindings.get(n, ()) if b.stmt is s]


def _makes_tensor(b: Binding, block: ast.With, scope: Scope, ctx: Context) -> bool:
    """``b`` (in the block) binds a new tensor: an assignment of a tensor-valued call or
    operation, or ``+=`` of one onto a name that held a Python number before the block."""
    s, v = b.stmt, b.value
    if v is None or not _tensor_value(v, b.line, scope, ctx):
        return False
    if isinstance(s, ast.AugAssign):
        before = scope.binding_before(b.name, block.lineno)
        prior = [x for x in scope.bindings.get(b.name, ())
                 if block.lineno <= x.line < b.line]  # an earlier binding in the block
        if prior:
            return True
        return before is not None and before.kind == NUMBER and isinstance(
            before.value, ast.Constant)
    return isinstance(v, (ast.Call, ast.BinOp))


def _tensor_value(v: ast.expr, line: int, scope: Scope, ctx: Context) -> bool:
    if scope.kind(v, line) == NUMBER:
        return False
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
           and n.func.attr in ("item", "tolist", "numpy") for n in walk(v)):
        return False
    if scope.kind(v, line) in TENSOR_KINDS:
        return True
    call = v.left if isinstance(v, ast.BinOp) and isinstance(v.left, ast.Call) else v
    return isinstance(call, ast.Call) and (
        is_loss_callee(ctx, call.func) or calls_module(call, scope, ctx)
        or _torch_op(ctx.qualified_name(call.func) or ""))


def _torch_op(qual: str) -> bool:
    """``torch.sigmoid``, ``F.softmax``, ``torch.linalg.norm``: an op that returns a
    tensor (not ``torch.is_tensor``, ``torch.numel``, ``torch.device``...)."""
    mod, _, last = qual.rpartition(".")
    return mod in TENSOR_MODULES and last[:1].islower() and \
        not last.startswith(("is_", "get_", "set_", "manual_seed", "numel", "device",
                             "no_grad", "enable_grad", "inference_mode", "compile", "load",
                             "save"))


def _returns_tensor(fn: ast.AST, ctx: Context) -> bool:
    scope = ctx.scope(fn)
    rets = [r for r in walk(fn) if isinstance(r, ast.Return)]
    return bool(rets) and all(
        r.value is not None and isinstance(r.value, (ast.Call, ast.BinOp))
        and _tensor_value(r.value, r.lineno, scope, ctx) for r in rets)


def _in_place(s: ast.stmt) -> tuple[str, str] | None:
    """(name, operator) of an in-place update of a plain name: ``t /= n``, ``t.add_(x)``,
    ``t[i] = v``."""
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
        return s.target.id, _OPS.get(type(s.op), "+")
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        f = s.value.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.attr.endswith("_") and not f.attr.startswith("_") and \
                f.attr != "requires_grad_":
            return f.value.id, ""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
            isinstance(s.targets[0], ast.Subscript) and isinstance(s.targets[0].value, ast.Name):
        return s.targets[0].value.id, ""
    return None


def _keyed(name: str, s: ast.Assign, scope: Scope) -> bool:
    """``name[k] = v`` on a mapping: a string key, or ``name.keys()``/``name.items()`` called
    in the function (a tensor has neither): the entry is rebound, nothing written in place."""
    key = s.targets[0].slice  # type: ignore[attr-defined]
    return isinstance(key, ast.Constant) and isinstance(key.value, str) or any(
        m.receiver == name for attr in ("keys", "items") for m in scope.calls_to(attr))


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
        ast.Pow: "**", ast.Mod: "%"}


def _under_inference(s: ast.stmt, scope: Scope, ctx: Context) -> bool:
    off = scope.grad_off_at(s)
    if off is None:
        return False
    if isinstance(off, (ast.With, ast.AsyncWith)):
        return any(grad_mode_of(it.context_expr, ctx.imports) == "inference" for it in off.items)
    return grad_mode_of(off, ctx.imports) == "inference"  # type: ignore[arg-type]
