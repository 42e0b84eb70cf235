"""GT708: the result of an out-of-place tensor operation is dropped (the tensor is unchanged)."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Callable, Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.analysis.project import foreign_method
from gradtrace.lint.flow import DETACHED, GRAPH, LEAF, MODULE, NONE, NUMBER, NUMPY, OPTIMIZER, \
    PARAMETER, PARAMS
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.tensor_api import TENSOR_ATTRS

# Tensor operations that return a new tensor and have an in-place twin spelled with a trailing
# underscore (``clamp`` / ``clamp_``): called as a statement of its own, the new tensor is
# dropped and the receiver is left as it was. Not ``fill_diagonal`` nor ``zero``: torch has
# only their in-place spelling (``Tensor.fill_diagonal`` is an AttributeError), and
# ``np.fill_diagonal(a, 0)`` is NumPy's in-place function (graph-generation's data.py).
PURE_WITH_INPLACE = frozenset({
    "clamp", "clip", "clamp_min", "clamp_max", "add", "sub", "mul", "div", "neg", "abs",
    "sqrt", "exp", "log", "pow", "sign", "sigmoid", "tanh", "relu", "floor", "ceil", "round",
    "masked_fill", "index_fill", "index_add", "scatter", "scatter_add", "renorm", "lerp",
    "addcmul", "addcdiv", "nan_to_num", "fmod", "remainder", "reciprocal", "square",
    "true_divide", "multiply", "subtract", "divide", "detach"})
# ... of which these take no argument as a tensor's method (`t.log()`; `t.log(w, step)` raises
# TypeError): called with arguments, the receiver is another object (a summary's `log(writer,
# step)`, biva's `Diagnostic`)
NO_ARGUMENTS = frozenset({
    "neg", "abs", "sqrt", "exp", "log", "sign", "sigmoid", "tanh", "relu", "floor", "ceil",
    "reciprocal", "square", "detach"})
# ... of which these names are torch.Tensor's own (no NumPy array, container or common
# library object has them): on a name whose value the scope cannot place, the call is still
# a tensor's (flamingo's `attn.masked_fill(mask, 0.)` on an attention map built through a
# generator the scope does not follow)
TENSOR_ONLY = frozenset({
    "masked_fill", "index_fill", "index_add", "scatter_add", "clamp_min", "clamp_max",
    "renorm", "addcmul", "addcdiv", "nan_to_num", "lerp"})
# tensor methods whose result shares the receiver's storage: an in-place op on it changes the
# receiver (``p.grad.view(-1).clamp_(-1, 1)``)
ALIASING = frozenset({
    "view", "view_as", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "t",
    "permute", "narrow", "select", "expand", "expand_as", "detach", "diagonal", "movedim",
    "unflatten", "as_strided", "contiguous"})
# NumPy's ufuncs take `out` positionally after their inputs: `np.multiply(a, s, a)` and
# `np.sqrt(a, a)` write into `a` (checked on NumPy 2.4); the number of inputs before it, and
# `np.nan_to_num(x, False)` whose second positional is `copy`
NUMPY_INPUTS = {"clip": 3, "round": 2, "nan_to_num": 1, **{m: 1 for m in (
    "abs", "sqrt", "exp", "log", "sign", "floor", "ceil", "reciprocal", "square", "tanh",
    "negative", "absolute")}}
# the scope's kinds of a tensor, and of values that are certainly not one
TENSOR_KINDS = (GRAPH, DETACHED, LEAF, PARAMETER)
NOT_TENSOR_KINDS = (MODULE, OPTIMIZER, NUMBER, NUMPY, PARAMS, NONE)


def _tensor_receiver(expr: ast.AST, method: str, ctx: Context) -> bool:
    """``p.grad``, ``p.grad.data``, ``w.data``, a name whose binding is a tensor, or a name or
    attribute of unknown value receiving a method only tensors have."""
    if isinstance(expr, ast.Attribute) and expr.attr in ("grad", "data"):
        return True
    try:
        kind = ctx.scope().kind(expr)
    except Exception:  # pragma: no cover - an expression the scope cannot place
        return False
    if kind in TENSOR_KINDS or _checked_tensor(expr, ctx):
        return True
    root = expr
    while isinstance(root, ast.Attribute):
        root = root.value
    return kind not in NOT_TENSOR_KINDS and method in TENSOR_ONLY \
        and isinstance(root, ast.Name) and root.id not in ctx.imports.aliases and any(
            v == "torch" or v.startswith("torch.") for v in ctx.imports.aliases.values())


def _checked_tensor(expr: ast.AST, ctx: Context) -> bool:
    """``if torch.is_tensor(buffer): buffer.detach()``: the statement runs in the body of an
    ``if`` whose test (or one operand of its ``and``) is ``torch.is_tensor(x)`` or
    ``isinstance(x, torch.Tensor)`` for this very name: there it is a tensor (padertorch's
    SummaryHook ``_detach``)."""
    if not isinstance(expr, ast.Name):
        return False
    inner = ctx.stmts[-1] if ctx.stmts else None
    for s in reversed(ctx.stmts[:-1]):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(s, ast.If) and inner in s.body and any(
                _is_tensor_test(t, expr.id, ctx) for t in (
                    s.test.values if isinstance(s.test, ast.BoolOp)
                    and isinstance(s.test.op, ast.And) else [s.test])):
            return True
        inner = s
    return False


def _is_tensor_test(t: ast.AST, name: str, ctx: Context) -> bool:
    """``torch.is_tensor(name)`` / ``isinstance(name, torch.Tensor)`` (or a tuple of types
    holding only tensor classes)."""
    if not isinstance(t, ast.Call) or not t.args or not isinstance(t.args[0], ast.Name) \
            or t.args[0].id != name:
        return False
    q = ctx.qualified_name(t.func) or ""
    if q == "torch.is_tensor" and len(t.args) == 1:
        return True
    if isinstance(t.func, ast.Name) and t.func.id == "isinstance" and len(t.args) == 2:
        types = t.args[1].elts if isinstance(t.args[1], ast.Tuple) else [t.args[1]]
        return bool(types) and all((ctx.qualified_name(x) or "") in (
            "torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter")
            for x in types)
    return False


def _member_detached(call: ast.Call, ctx: Context) -> bool:
    """``for h in self._all: h.detach()``: the receiver is the target of a loop this
    statement runs in, and no class of the file has a ``detach`` method that changes its
    object in place (returns nothing) other than the one this loop is in, so the loop's items
    are tensors (a state container's own ``detach()`` walking its tensors, OpenNMT's
    DecoderState). ``weakref.finalize.detach()`` and stream ``detach()`` are held on an
    attribute, never a loop target."""
    recv = call.func.value  # type: ignore[attr-defined]
    if not isinstance(recv, ast.Name) or not any(
            isinstance(lp, (ast.For, ast.AsyncFor)) and any(
                isinstance(n, ast.Name) and n.id == recv.id for n in ast.walk(lp.target))
            for lp in ctx.loops):
        return False
    own = ctx.function
    return not any(
        isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "detach"
        and f is not own and not any(isinstance(r, ast.Return) and r.value is not None
                                     for r in ast.walk(f))
        for c in ast.walk(ctx.tree) if isinstance(c, ast.ClassDef) for f in c.body)


def _held(expr: ast.AST) -> bool:
    """A value something else still holds (a name, an attribute, an item, or a view of one):
    only then can a dropped result mean an update that never happened. A fresh value
    (``torch.relu(fc(x))``, ``torch.sigmoid(a + b)``) is held by nobody: the line computes and
    drops it, as a notebook's last line does to display it (rasbt's fc-to-conv)."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in ALIASING:
        expr = expr.func.value
    return isinstance(expr, (ast.Name, ast.Attribute, ast.Subscript))


def _rebound_unread(node: ast.stmt, target: ast.AST, ctx: Context) -> bool:
    """The name ``target`` is bound again later in ``node``'s own block (``x1 =
    torch.FloatTensor(3, 4)``) with no read of it, nor a jump, in between: nothing could
    see the update, so none is lost (a notebook cell showing ``torch.exp(x1)``, the next
    cell making a new ``x1``). In the module's body, a read by a statement that only shows a
    value (an expression statement) does not count."""
    if not isinstance(target, ast.Name):
        return False
    parent = ctx.stmts[-2] if len(ctx.stmts) > 1 else ctx.tree
    block = next((b for f in ("body", "orelse", "finalbody")
                  if node in (b := getattr(parent, f, None) or [])), None)
    if block is None:
        return False
    name = target.id
    for s in block[block.index(node) + 1:]:
        nodes = list(ast.walk(s))
        if parent is ctx.tree and isinstance(s, FUNCTION_TYPES + (ast.ClassDef,)):
            if any(isinstance(n, ast.Name) and n.id == name or isinstance(
                    n, (ast.Global, ast.Nonlocal)) and name in n.names for n in nodes):
                return False
            continue  # a def of the script that never names it cannot read it
        if parent is ctx.tree and isinstance(s, ast.Expr) and _shows(s.value, ctx):
            continue  # a script's line that shows a value (`nn.Sigmoid()(z)` after
            # `torch.sigmoid(z)`, one notebook cell each) keeps nothing: no lasting read
        if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Store)
               or isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.Raise, ast.Yield,
                                 ast.YieldFrom, ast.Global, ast.Nonlocal)) for n in nodes):
            return False
        if isinstance(s, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in s.targets):
            return True
        if any(isinstance(n, ast.Name) and n.id == name for n in nodes) or any(
                isinstance(n, FUNCTION_TYPES + (ast.ClassDef,)) for n in nodes):
            return False
    return False


def _shows(e: ast.expr, ctx: Context) -> bool:
    """An expression statement that only computes a value to show: no call, or a torch
    function, a torch layer built and called at once (``nn.Tanh()(z)``), ``print``, or an
    out-of-place tensor method of a name (``x.type(torch.DoubleTensor)``, ``x.view(2, -1)``)."""
    if not isinstance(e, ast.Call):
        return not any(isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr, ast.Yield,
                                      ast.YieldFrom, ast.Await)) for n in ast.walk(e))
    f = e.func.func if isinstance(e.func, ast.Call) else e.func
    q = ctx.qualified_name(f) or ""
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and not q.startswith(
            "torch.") and f.value.id not in ctx.imports.aliases:
        return f.attr in TENSOR_ATTRS and not f.attr.endswith("_") \
            and f.attr not in _NOT_SHOWN and _shows(ast.Tuple(
                elts=[*e.args, *(k.value for k in e.keywords)], ctx=ast.Load()), ctx)
    return q.startswith("torch.") or isinstance(f, ast.Name) and f.id == "print"


# tensor methods that act (on the graph, a hook list, a stream) though they end in no `_`
_NOT_SHOWN = frozenset({"backward", "register_hook", "register_post_accumulate_grad_hook",
                        "retain_grad", "record_stream"})


def _top_level_unread(node: ast.stmt, target: ast.AST, ctx: Context) -> bool:
    """A statement of the module's own body whose receiver is a module-level name that no
    later statement of the module reads (but to show it) and no function or class of the file
    reads: nothing could see an update of it, so none is lost; the line shows a value, as a
    notebook cell's last line does (``x.add(y)`` after ``x = x.to(device)``, ``torch.sqrt(tm)``;
    ``torch.add(x, y)``, then ``torch.sub(x, y)`` and ``x.dtype`` in the next cells)."""
    while isinstance(target, ast.Attribute) and _shows(node.value, ctx):  # type: ignore
        target = target.value  # `torch.abs(ae.l1_strength)` shown, `ae` never read again
    if not isinstance(target, ast.Name) or len(ctx.stmts) != 1 \
            or node not in getattr(ctx.tree, "body", ()):
        return False
    name = target.id

    def reads(tree: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Store)
                   or isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names
                   for n in ast.walk(tree))
    body = ctx.tree.body  # type: ignore[attr-defined]
    if any(reads(s) and not (isinstance(s, ast.Expr) and _shows(s.value, ctx))
           for s in body[body.index(node) + 1:]):
        return False  # a later line that only shows it (a notebook cell's `torch.sub(x, y)`,
        # `x.dtype`) keeps nothing that an update would have changed
    return not any(isinstance(f, FUNCTION_TYPES + (ast.ClassDef, ast.Lambda))
                   and _reads_global(f, name, reads)
                   for s in body[:body.index(node)] for f in ast.walk(s))


def _receiver_shown_next(node: ast.Expr, target: ast.AST, ctx: Context) -> bool:
    """# NOTE [receiver shown next]
    A statement of the module's own body that shows a value (:func:`_shows`: ``z.add(1)``)
    followed at once by the receiver alone (``z``): a bare name as a statement does nothing in
    a script, so the file's lines display values, as a notebook's cells do; the op's result is
    shown, then the receiver, unchanged (udacity's DL_PyTorch, ``z.add(1)``, ``z``, then
    ``z.add_(1)``: out-of-place against in-place). The name must come next, with nothing in
    between; anything else after the op (a read, an assignment) is judged as before."""
    if not isinstance(target, ast.Name) or len(ctx.stmts) != 1 or not _shows(node.value, ctx):
        return False
    body = getattr(ctx.tree, "body", [])
    i = next((k for k, s in enumerate(body) if s is node), None)
    nxt = body[i + 1] if i is not None and i + 1 < len(body) else None
    return isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Name) \
        and nxt.value.id == target.id


def _reads_global(f: ast.AST, name: str, reads: Callable[[ast.AST], bool]) -> bool:
    """The def, lambda or class ``f`` reads the module's ``name``: not when ``name`` is its own
    (a parameter, ``def forward(self, x)``, or bound in it without ``global``); a class by the
    statements of its body (its methods are judged one by one)."""
    if isinstance(f, ast.ClassDef):
        return any(reads(st) for st in f.body if not isinstance(st, FUNCTION_TYPES))
    a = f.args  # type: ignore[attr-defined]
    own = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}
    nodes = list(ast.walk(f))
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in nodes):
        return True
    if name in own or any(isinstance(n, ast.Name) and n.id == name
                          and isinstance(n.ctx, ast.Store) for n in nodes):
        return False
    return reads(f)


class TensorOpResultDiscarded(Rule):
    """An out-of-place tensor operation (`t.clamp(-1, 1)`, `torch.clamp(g, -1, 1)`,
    `p.grad.mul(0.5)`) written as a statement of its own: its result is thrown away.

    Why: these operations return a new tensor and leave their input as it is; only the
    in-place twin with a trailing underscore (`clamp_`, `mul_`) or an assignment changes the
    value; `h.detach()` alone leaves `h` on its graph (OpenNMT's decoder state kept the last
    batch's graph and the next backward failed). The DQN tutorial's `param.grad.data.clamp(-1, 1)` never clipped a gradient: the
    optimizer steps with the unclipped ones, and nothing fails. Use `clamp_` (or assign the
    result back). Known limits: the receiver must be seen to be a tensor (`.grad`, `.data`, a
    parameter, a tensor made in the file) or the call a `torch.` function.
    """

    code = "GT708"
    name = "tensor-op-result-discarded"
    message = ("`{call}` returns a new tensor and leaves `{target}` unchanged; as a statement of "
               "its own its result is thrown away, so the {what} never happens: use the "
               "in-place `{method}_` or assign the result (or delete the line if no "
               "{what} is meant)")
    triggers = tuple(sorted(PURE_WITH_INPLACE))
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def clip(model, opt):
                for p in model.parameters():
                    p.grad.data.clamp(-1, 1)
                opt.step()
            """, at=(5, 8)),
        Bad("""
            import torch

            def shrink(weights):
                for w in weights:
                    torch.clamp(w.grad, min=-5.0, max=5.0)
            """, at=(5, 8)),
        Bad("""
            import torch

            def attend(q, k, mask):
                attn = (q @ k.transpose(-1, -2)).softmax(-1)
                attn.masked_fill(mask, 0.0)
                return attn
            """, at=(5, 4)),
        Good("""
            import torch

            def attend(q, k, mask):
                attn = (q @ k.transpose(-1, -2)).softmax(-1)
                attn = attn.masked_fill(mask, 0.0)
                return attn
            """),
        Bad("""
            import numpy as np

            def load(feats):
                np.nan_to_num(feats)
                return feats
            """, at=(4, 4)),
        Good("""
            import numpy as np

            def load(feats):
                feats = np.nan_to_num(feats)
                return feats
            """),
        Good("""
            import numpy as np

            def load(feats):
                np.nan_to_num(feats, copy=False)
                return feats
            """),
        Good("""
            import torch

            def clip(model, opt):
                for p in model.parameters():
                    p.grad.data.clamp_(-1, 1)
                opt.step()
            """),
        Good("""
            import torch

            def shrink(weights):
                for w in weights:
                    w.grad = torch.clamp(w.grad, min=-5.0, max=5.0)
            """),
        Bad("""
            import torch

            class State:
                def __init__(self, h, c):
                    self.hidden = (h, c)

                def detach(self):
                    for t in self.hidden:
                        t.detach()
            """, at=(9, 12)),
        Good("""
            import torch

            class State:
                def __init__(self, h, c):
                    self.hidden = (h, c)

                def detach(self):
                    self.hidden = tuple(t.detach() for t in self.hidden)

            def run(states):
                for s in states:
                    s.detach()
            """),
    ]

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        call = node.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            return
        method = call.func.attr
        if method not in PURE_WITH_INPLACE or any(k.arg == "out" for k in call.keywords):
            return
        qual = ctx.qualified_name(call.func) or ""
        if qual in (f"torch.{method}", f"numpy.{method}"):
            if not call.args or any(k.arg == "copy" for k in call.keywords):
                return  # NumPy's `copy=False` writes into its argument
            if qual.startswith("numpy.") and len(call.args) > NUMPY_INPUTS.get(method, 2):
                return  # its `out` given positionally: `np.add(a, m, a)` updates `a`
            target = call.args[0]
        elif not qual.startswith("torch.") and (
                _tensor_receiver(call.func.value, method, ctx)
                or method == "detach" and _member_detached(call, ctx)):
            if foreign_method(ctx, call, ctx.scope(), call.lineno) is not None:
                return  # `model_s.lerp(model, b)`: a method of the project's class, not Tensor's
            target = call.func.value
        else:
            return
        if (method == "detach" or method in NO_ARGUMENTS and target is call.func.value) and (
                call.args or call.keywords):
            return
        if not _held(target) or _rebound_unread(node, target, ctx) \
                or _top_level_unread(node, target, ctx) \
                or _receiver_shown_next(node, target, ctx):  # NOTE [receiver shown next]
            return
        what = "clipping" if method in ("clamp", "clip", "clamp_min", "clamp_max") else \
            "cut from the graph" if method == "detach" else "update"
        found = self.report(node, ctx, call=ctx.source(call)[:60], target=dotted(target) or
                            ctx.source(target)[:40], what=what, method=method)
        if qual.startswith("numpy."):  # NumPy has no in-place twin: assign the result
            name = dotted(target) or ctx.source(target)[:40]
            found = replace(found, message=(
                f"`{ctx.source(call)[:60]}` returns a new array and leaves `{name}` unchanged; "
                f"as a statement of its own its result is thrown away, so the {what} never "
                f"happens: assign it (`{name} = {ctx.source(call)[:60]}`) or delete the line"))
        yield found
