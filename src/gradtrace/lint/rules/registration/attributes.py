"""GT411: a plain tensor attribute of a module handed to an optimizer as if it were a parameter."""
from __future__ import annotations

import ast
import bisect
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, TENSOR
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_fields, of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call


class TensorAttributeTrainedAsParameter(Rule):
    """A plain tensor stored on a module is given to the optimizer, but it never requires grad.

    Why: `self.memory = torch.randn(n, d)` in `__init__` is an ordinary attribute, not an
    `nn.Parameter` (NOTE [registration]; pytorch-facts.md#registration): it does not require grad,
    so
    `backward()` never fills its `.grad`, and an optimizer handed it explicitly
    (`SGD(list(model.parameters()) + [model.memory])`) skips it at every `step()`: it never
    changes, silently (verified on torch 2.13). Make it `nn.Parameter(torch.randn(n, d))`, so
    that `parameters()`, `state_dict()` and `.to()` see it too.
    Known limits: the tensor must be made by a `torch` factory in a method of an `nn.Module`
    class of the same file, and handed to a `torch.optim` optimizer as `self.<name>` or
    through an object the analysis knows is that class (`model = Net()`); a tensor that
    requires grad (`requires_grad=True`, `requires_grad_()`) anywhere in the file is
    GT402's business, or trained on purpose.
    """

    code = "GT411"
    gate_statements = True
    name = "tensor-attribute-trained-as-parameter"
    message = ("`self.{attr}` is a plain tensor attribute that never requires grad, yet the "
               "optimizer `{opt}` is given it (line {line}): it gets no gradient and `step()` "
               "never changes it")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Memory(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.memory = torch.randn(16, 4)
                def forward(self, x):
                    return self.fc(x) @ self.memory.t()
            model = Memory()
            opt = torch.optim.SGD(list(model.parameters()) + [model.memory], lr=0.1)
            """, at=(7, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Memory(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.memory = nn.Parameter(torch.randn(16, 4))
                    self.proj = torch.randn(4, 4)
                def forward(self, x):
                    return self.fc(x @ self.proj) @ self.memory.t()
            model = Memory()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """),
        Good("""
            import torch
            import torch.nn as nn
            class Temperature(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.log_t = torch.zeros(1)
                    self.log_t.requires_grad_()
            model = Temperature()
            opt = torch.optim.LBFGS([model.log_t], lr=0.01)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        calls = list(_optimizer_calls(ctx))
        given = {n.attr for _, call, _ in calls for n in walk(call)
                 if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}
        if not given:
            return
        an = ctx.analysis
        plain = {}  # class name -> {attr: AttrInfo} of never-grad plain tensors
        for cls in an.classes.values():
            if not cls.is_module:
                continue
            for name, info in cls.attrs.items():
                if name not in given:
                    continue
                k = cls.attr_kind(name)
                if k is not None and k.what == TENSOR and not k.requires_grad \
                        and not info.later and not info.buffer:
                    plain.setdefault(cls.name, {})[name] = info
        if not plain:
            return
        names = {a for attrs in plain.values() for a in attrs}
        names -= _made_trainable(ctx, names)
        seen: set[tuple[str, str]] = set()
        for owner, call, opt in calls:
            for n in walk(call):
                if not isinstance(n, ast.Attribute) or n.attr not in names \
                        or not isinstance(n.ctx, ast.Load):
                    continue
                k = an.kind_in(n.value, owner, call.lineno)
                if k is None or k.what != MODULE or k.cls not in plain \
                        or n.attr not in plain[k.cls] or (k.cls, n.attr) in seen:
                    continue
                seen.add((k.cls, n.attr))
                info = plain[k.cls][n.attr]
                rel = (Related(ctx.path, call.lineno, f"`{ctx.source(n)}` is given to the "
                               "optimizer here", ctx.column(n)),)
                yield self.report(info.stmt, ctx, related=rel, attr=n.attr, opt=opt,
                                  line=call.lineno)


def _optimizer_calls(ctx: Context) -> Iterator[tuple[ast.AST, ast.Call, str]]:
    """(enclosing function or module, optimizer call, its name) for every optimizer built in
    the file; only statements whose lines hold ``optim`` are searched."""
    lines = [i + 1 for i, text in enumerate(ctx.code_lines) if "optim" in text]
    if not lines:
        return
    stack: list[tuple[ast.AST, list[ast.stmt]]] = [(ctx.tree, ctx.tree.body)]
    while stack:
        owner, body = stack.pop()
        for st in body:
            first = st.decorator_list[0].lineno if getattr(st, "decorator_list", None) \
                else st.lineno
            k = bisect.bisect_left(lines, first)
            if k == len(lines) or lines[k] > (st.end_lineno or st.lineno):
                continue
            inner = st if isinstance(st, FUNCTION_TYPES) else owner
            for field in child_fields(type(st)):
                v = getattr(st, field, None)
                if field in BODIES:
                    if v and field not in ("handlers", "cases"):  # their bodies: below
                        stack.append((inner, v))
                    continue
                for x in v if isinstance(v, list) else [v]:
                    if isinstance(x, ast.AST):
                        yield from _calls_in(x, owner, ctx)
            for h in getattr(st, "handlers", ()):
                stack.append((inner, h.body))
            for c in getattr(st, "cases", ()):
                stack.append((inner, c.body))


BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _calls_in(expr: ast.AST, owner: ast.AST, ctx: Context
              ) -> Iterator[tuple[ast.AST, ast.Call, str]]:
    for n in of_types(expr, (ast.Call,)):
        if is_optimizer_call(n, ctx):
            st = ctx.scope(owner).statement_of(n)
            target = st.targets[0] if isinstance(st, ast.Assign) else None
            yield owner, n, (dotted(target) if target is not None else None) or \
                (ctx.call_name(n) or "").rpartition(".")[2]


def _made_trainable(ctx: Context, names: set[str]) -> set[str]:
    """Attribute names on which the file sets ``requires_grad`` (or calls ``requires_grad_``)
    anywhere, or that it wraps in ``nn.Parameter``."""
    out: set[str] = set()
    if not ctx.mentions("requires_grad", "Parameter"):
        return out
    for n in of_types(ctx.tree, (ast.Attribute,)):
        if n.attr in ("requires_grad", "requires_grad_") \
                and isinstance(n.value, ast.Attribute) and n.value.attr in names:
            out.add(n.value.attr)
        elif isinstance(n, ast.Call) and (ctx.call_name(n) or "").startswith("torch.nn.Param"):
            out.update(a.attr for a in walk(n) if isinstance(a, ast.Attribute)
                       and a.attr in names)
    return out


RANDOM_FACTORIES = frozenset({"torch.randn", "torch.rand", "torch.normal", "torch.randn_like",
                              "torch.rand_like", "torch.empty", "torch.Tensor",
                              "torch.FloatTensor"})
TENSOR_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "contiguous",
                          "uniform_", "normal_", "t", "view", "reshape"})
WEIGHT_FUNCS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.einsum",
                          "torch.nn.functional.linear", "torch.nn.functional.conv1d",
                          "torch.nn.functional.conv2d", "torch.nn.functional.embedding"})


class RandomWeightAsPlainAttribute(Rule):
    """A module's weight is made at random as a plain tensor attribute: it never trains.

    Why: `self.keys = torch.randn(n, d)` in `__init__` stores an ordinary tensor, not an
    `nn.Parameter` (NOTE [registration]; pytorch-facts.md#registration). Used as a weight in
    `forward`
    (`q @ self.keys.t()`), it is missing from `parameters()`, so the optimizer never updates
    it and it keeps its random values, silently (verified on torch 2.13); `state_dict()` and
    `.to()` leave it out too, so a reloaded model gets other random values. Make it
    `nn.Parameter(torch.randn(n, d))` to learn it, or `self.register_buffer("keys", ...)` to
    keep it fixed and saved.
    Known limits: only a tensor drawn at random (`randn`, `rand`, `normal`) or left
    uninitialised (`empty`, `torch.Tensor(n, d)`) in
    `__init__` of an `nn.Module` class of the file, never assigned again, used in `forward` as
    an operand of `@`, `matmul`/`mm`/`bmm`/`einsum` or `F.linear`/`conv`, in a file that
    builds an optimizer and runs `backward()`.
    """

    code = "GT412"
    gate_statements = True
    name = "random-weight-as-plain-attribute"
    message = ("`self.{attr}` is drawn at random and used as a weight in `forward` (line "
               "{line}), but it is a plain tensor attribute: it is not in `parameters()`, so "
               "it never trains, and `state_dict()`/`.to()` leave it out")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Memory(nn.Module):
                def __init__(self, n, d):
                    super().__init__()
                    self.keys = torch.randn(n, d).to("cpu")
                    self.proj = nn.Linear(d, d)
                def forward(self, x):
                    return torch.softmax(self.proj(x) @ self.keys.t(), -1)
            mem = Memory(10, 8)
            opt = torch.optim.Adam(mem.parameters())
            mem(torch.randn(4, 8)).sum().backward()
            """, at=(6, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Memory(nn.Module):
                def __init__(self, n, d):
                    super().__init__()
                    self.keys = nn.Parameter(torch.randn(n, d))
                    self.register_buffer("proj", torch.randn(d, d))
                    self.noise = torch.randn(1, d)
                def forward(self, x):
                    return (x @ self.proj + self.noise) @ self.keys.t()
            mem = Memory(10, 8)
            opt = torch.optim.Adam(mem.parameters())
            mem(torch.randn(4, 8)).sum().backward()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return
        an = ctx.analysis
        for cls in an.classes.values():
            if not cls.is_module or "__init__" not in cls.methods:
                continue
            init = cls.methods["__init__"]
            candidates = {name: info for name, info in cls.attrs.items()
                          if info.method is init and not info.later and not info.buffer
                          and _random_tensor(info.value, ctx)}
            if not candidates:
                continue
            candidates = {n: i for n, i in candidates.items()
                          if n not in _made_trainable(ctx, set(candidates))}
            for name, use in _weight_uses(cls, set(candidates), ctx):
                yield self.report(candidates[name].stmt, ctx, related=(Related(
                    ctx.path, use.lineno, f"`self.{name}` is used as a weight here",  # type: ignore[attr-defined]
                    ctx.column(use)),), attr=name, line=use.lineno)  # type: ignore[attr-defined]


def _random_tensor(value: ast.expr | None, ctx: Context) -> bool:
    """``torch.randn(...)`` (also ``.to(dev)``, ``* 0.01``, ``.uniform_(...)``), not asking
    for grad (that is GT402's finding)."""
    e = value
    while True:
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Div)):
            e = e.left if isinstance(e.left, ast.Call) else e.right
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in TENSOR_MOVES:
            e = e.func.value
        else:
            break
    q = ctx.call_name(e) if isinstance(e, ast.Call) else None
    if not isinstance(e, ast.Call) or q not in RANDOM_FACTORIES:
        return False
    if q in ("torch.Tensor", "torch.FloatTensor") and not all(
            isinstance(a, (ast.Name, ast.Constant, ast.Attribute)) for a in e.args):
        return False  # `torch.Tensor([[1, 0], [0, 1]])`: data (a fixed kernel), not a size
    return not any(k.arg == "requires_grad" for k in e.keywords)


def _self_attr_of(e: ast.AST) -> str | None:
    """``keys`` for ``self.keys``, ``self.keys.t()``, ``self.keys.T``, ``self.keys[i]``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in ("t", "transpose", "permute", "view", "reshape", "to"):
            e = e.func.value
        elif isinstance(e, ast.Attribute) and e.attr in ("T", "mT"):
            e = e.value
        elif isinstance(e, ast.Subscript):
            e = e.value
        else:
            break
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


def _weight_uses(cls, names: set[str], ctx: Context) -> Iterator[tuple[str, ast.AST]]:  # type: ignore[no-untyped-def]
    """(name, node) for the first use of each of ``names`` as a weight in ``forward`` (or a
    method it calls)."""
    if not names or not names & cls.forward_uses:
        return
    seen: set[str] = set()
    todo, done = ["forward"], set()
    while todo:
        m = cls.methods.get(todo.pop())
        if m is None or m.name in done:
            continue
        done.add(m.name)
        for n in walk(m):
            operands: list[ast.AST] = []
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                operands = [n.left, n.right]
            elif isinstance(n, ast.Call):
                if (ctx.call_name(n) or "") in WEIGHT_FUNCS:
                    operands = list(n.args)
                f = n.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                        and f.value.id == "self" and f.attr in cls.methods:
                    todo.append(f.attr)
            for o in operands:
                a = _self_attr_of(o)
                if a in names and a not in seen:
                    seen.add(a)
                    yield a, n
