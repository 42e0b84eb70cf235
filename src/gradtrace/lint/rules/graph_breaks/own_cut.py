"""GT117: a module reads its own trained Parameter only through `.data` / `.detach()` or a
call that returns only values made with grad off."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.grad_off_returns import returns_off
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.param_attrs import (
    forward_methods, only_cut_reads, read_kind, trained_parameter,
)
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import node_mentions


class ParameterReadOnlyCut(Rule):
    """A module registers a Parameter in `__init__` and its methods read it only through
    `.data` or `.detach()` (`torch.matmul(X, self.weight.data) + self.bias.data`).

    Why: `.data` and `.detach()` hand back the values without the graph. What `forward`
    computes from them has no path back to the Parameter: it never gets a gradient and the
    optimizer never moves it, silently; when every parameter of the network is read this way
    the loss has no `grad_fn` and `backward()` raises `element 0 of tensors does not require
    grad and does not have a grad_fn` (d2l-ai/d2l-en#2600, checked on torch 2.13). Use the
    Parameter itself. The same holds when the Parameter is read only as the argument of a
    call that computes everything it returns with grad off (a constraint submodule whose
    `forward` clamps under `torch.no_grad()`, a `@torch.no_grad()` method: leaf-audio's
    Gabor kernel): the grad-off block is reported.
    Known limits: the Parameter must be assigned once in `__init__` (`nn.Parameter(...)`,
    not `requires_grad=False`) in a file that calls `backward()` and freezes nothing; a
    class that reads it live anywhere, or updates it by hand (an in-place op, a write through
    `.data`, an EMA), and a file that reads the attribute live outside the class, are left
    alone (NOTE [parameters read only cut]).
    """

    code = "GT117"
    needs_step = True  # NOTE [step files]
    name = "parameter-read-only-cut"
    message = ("`{read}` is the only way the module reads its Parameter `self.{attr}`: the "
               "values come without the graph, so `self.{attr}` never gets a gradient and "
               "never trains; use `self.{attr}` itself")
    message_off = ("`{read}` is the only way the module reads its Parameter `self.{attr}`, "
                   "and `{callee}` computes everything it returns under `{mode}`: the result "
                   "has no graph, so `self.{attr}` never gets a gradient and never trains; "
                   "compute it with grad enabled")
    triggers = (".data", ".detach(", "no_grad", "inference_mode")
    examples = [
        Bad("""
            import torch
            from torch import nn

            class MyLinear(nn.Module):
                def __init__(self, n, m):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(n, m))

                def forward(self, x):
                    return x @ self.weight.data

            net = MyLinear(4, 2)
            net(torch.randn(3, 4)).sum().backward()
            """, at=(10, 19)),
        Good("""
            import torch
            from torch import nn

            class MyLinear(nn.Module):
                def __init__(self, n, m):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(n, m))

                def forward(self, x):
                    self.norm = self.weight.data.norm()
                    return x @ self.weight

            net = MyLinear(4, 2)
            net(torch.randn(3, 4)).sum().backward()
            """),
        Bad("""
            import torch
            from torch import nn

            class Clamp(nn.Module):
                def forward(self, w):
                    with torch.no_grad():
                        return w.clamp(0.0, 1.0)

            class Gated(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gate = nn.Parameter(torch.rand(n))
                    self.limit = Clamp()

                def forward(self, x):
                    return x * self.limit(self.gate)

            net = Gated(4)
            net(torch.randn(3, 4)).sum().backward()
            """, at=(6, 8)),
        Good("""
            import torch
            from torch import nn

            class Gated(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gate = nn.Parameter(torch.rand(n))

                def forward(self, x):
                    return x * self.gate.clamp(0.0, 1.0)

                @torch.no_grad()
                def project(self):
                    self.gate.clamp_(0.0, 1.0)

            net = Gated(4)
            net(torch.randn(3, 4)).sum().backward()
            net.project()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return  # a Parameter trains only in a file that runs backward (trained_parameter)
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module:
            return
        yield from self._through_grad_off(cls, ctx)
        if not ctx.mentions(".data", ".detach("):
            return
        for attr in sorted(_cut_attrs(cls)):
            origin = trained_parameter(ctx, cls, attr)
            if origin is None:
                continue
            read = only_cut_reads(ctx, cls, attr)
            if read is None or _read_outside(ctx, cls, attr):
                continue
            cut = read
            yield self.report(cut, ctx, related=[Related(
                ctx.path, origin.lineno, f"`self.{attr}` is made a Parameter here",
                ctx.column(origin))], read=ctx.source(cut), attr=attr)


    def _through_grad_off(self, cls: ClassInfo, ctx: Context) -> Iterator[Finding]:
        """A Parameter whose only live reads are arguments of calls that return only values
        made with grad off (NOTE [no-grad helpers]): a constraint submodule whose `forward`
        clamps under `torch.no_grad()`, a `@torch.no_grad()` method."""
        if not ctx.mentions("no_grad", "inference_mode"):
            return
        for attr, calls in sorted(_passed_attrs(cls).items()):
            origin = trained_parameter(ctx, cls, attr)
            if origin is None:
                continue
            got = _only_off_reads(ctx, cls, attr, calls)
            if got is None or _read_outside(ctx, cls, attr):
                continue
            call, callee, off = got
            f = self.report(off, ctx, related=[
                Related(ctx.path, call.lineno, f"`self.{attr}` reaches the module's output "
                        "only through this call", ctx.column(call)),
                Related(ctx.path, origin.lineno, f"`self.{attr}` is made a Parameter here",
                        ctx.column(origin))], read=ctx.source(call), attr=attr)
            mode = ctx.source(off.items[0].context_expr) if isinstance(
                off, (ast.With, ast.AsyncWith)) else "@" + ctx.source(off)
            yield replace(f, message=self.message_off.format(
                read=ctx.source(call), attr=attr, callee=callee, mode=mode))


def _passed_attrs(cls: ClassInfo) -> dict[str, list[ast.Call]]:
    """``<attr>`` -> the calls given ``self.<attr>`` as a positional argument, in the
    class's methods (``__init__`` aside)."""
    out: dict[str, list[ast.Call]] = {}
    for m in cls.methods.values():
        if m.name == "__init__":
            continue
        for n in walk(m):
            if isinstance(n, ast.Call):
                for a in n.args:
                    if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) \
                            and a.value.id == "self":
                        out.setdefault(a.attr, []).append(n)
    return out


def _only_off_reads(ctx: Context, cls: ClassInfo, attr: str, calls: list[ast.Call]
                    ) -> tuple[ast.Call, str, ast.AST] | None:
    """(a call, its callee's name, its grad-off node) when every read of ``self.<attr>`` in
    the class's methods (``__init__`` aside) is a shape read, a cut, or the argument of a
    call whose callee returns only values made with grad off, one such call at least in
    ``forward``'s methods; None otherwise."""
    fwd = {id(m) for m in forward_methods(cls)}
    offs: dict[int, tuple[str, ast.AST]] = {}
    for c in calls:
        got = _off_callee(ctx, cls, c)
        if got is not None:
            offs[id(c)] = got
    if not offs:
        return None
    first = None
    for m in cls.methods.values():
        if m.name == "__init__":
            continue
        parents = {id(k): n for n in walk(m) for k in ast.iter_child_nodes(n)}
        for n in walk(m):
            if not (isinstance(n, ast.Attribute) and n.attr == attr
                    and isinstance(n.value, ast.Name) and n.value.id == "self"):
                continue
            how, _ = read_kind(n, parents)
            if how in ("shape", "cut"):
                continue
            p = parents.get(id(n))
            if how != "live" or not isinstance(p, ast.Call) or id(p) not in offs:
                return None
            if id(m) in fwd and (first is None or p.lineno < first.lineno):
                first = p
    if first is None:
        return None
    name, off = offs[id(first)]
    return first, name, off


def _off_callee(ctx: Context, cls: ClassInfo, call: ast.Call) -> tuple[str, ast.AST] | None:
    """(the callee's name, its grad-off node) when ``call`` runs ``self.<method>(...)`` of
    the class or ``self.<sub>(...)``, a module of a class of the file, whose every return is
    made with grad off."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return None
    fn = cls.methods.get(f.attr)
    name = f.attr
    if fn is None:
        k = cls.attr_kind(f.attr)
        sub = ctx.analysis.classes.get(k.cls or "") if k is not None and k.what == MODULE \
            else None
        fn = sub.methods.get("forward") if sub is not None and sub.is_module else None
        name = f"{sub.name}.forward" if sub is not None else name
    if fn is None or node_mentions(ctx, fn, ".backward(", "enable_grad", "set_grad_enabled"):
        return None
    off = returns_off(ctx, fn)
    return (name, off) if off is not None else None


def _cut_attrs(cls: ClassInfo) -> set[str]:
    """``<attr>`` of every ``self.<attr>.data`` / ``self.<attr>.detach`` in the class."""
    return {n.value.attr for n in walk(cls.node) if isinstance(n, ast.Attribute)
            and n.attr in ("data", "detach") and isinstance(n.value, ast.Attribute)
            and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"}


def _read_outside(ctx: Context, cls: ClassInfo, attr: str) -> bool:
    """The file reads ``<obj>.<attr>`` live outside the class (not ``self.<attr>`` of
    another class, not through ``.data``/``.detach()``/a shape read, not given to a
    ``torch.nn.init`` function nor written: initialisation)."""
    inside = {id(n) for n in walk(cls.node)}
    parents: dict[int, ast.AST] = file_parents(ctx)
    for n in walk(ctx.tree):
        if isinstance(n, ast.Attribute) and n.attr == attr and id(n) not in inside \
                and not (isinstance(n.value, ast.Name) and n.value.id == "self") \
                and read_kind(n, parents)[0] == "live":
            p = parents.get(id(n))
            if isinstance(p, ast.Call) and (ctx.qualified_name(p.func) or "").startswith(
                    "torch.nn.init."):
                continue
            return True
    return False
