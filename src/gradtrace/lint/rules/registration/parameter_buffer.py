"""GT490: an `nn.Parameter` handed to a constructor that registers the argument as a buffer."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

KEEPS = frozenset({"to", "float", "double", "type", "cuda", "cpu", "type_as"})


def _argument_kept(e: ast.AST, ctx: Context) -> str | None:
    """The name ``e`` keeps as the very object: ``length``, ``torch.as_tensor(length,
    **kw)``, ``length.to(device)`` (an argument that may be a Parameter stays one)."""
    while True:
        if isinstance(e, ast.Name):
            return e.id
        if isinstance(e, ast.Call) and e.args and \
                ctx.qualified_name(e.func) in ("torch.as_tensor", "torch.asarray"):
            e = e.args[0]
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in KEEPS:
            e = e.func.value
        else:
            return None


def _is_parameter(e: ast.AST, where: ast.AST, line: int, ctx: Context) -> bool:
    """``nn.Parameter(...)``, or a name of ``where`` bound once before ``line`` to one."""
    if isinstance(e, ast.Name):
        bs = ctx.scope(where).bindings_before(e.id, line)
        return len(bs) == 1 and bs[0].value is not None \
            and _is_parameter(bs[0].value, where, line, ctx)
    return isinstance(e, ast.Call) and ctx.qualified_name(e.func) == "torch.nn.Parameter"


def _type_tested(fn: ast.AST, name: str) -> bool:
    """``fn`` asks what ``name`` is (``isinstance(name, ...)``, ``type(name)``)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id in ("isinstance", "type") and n.args
               and isinstance(n.args[0], ast.Name) and n.args[0].id == name
               for n in ast.walk(fn))


class ParameterRegisteredAsBuffer(Rule):
    """A module's `__init__` registers an argument with `register_buffer`, and the file passes
    an `nn.Parameter` for that argument.

    Why: `register_buffer(name, t)` stores `t` among the module's buffers whatever `t` is: a
    Parameter given to it (as it is, through `torch.as_tensor(t)` or `.to(device)`, which
    return the same object when nothing changes) is not in `module.parameters()` (checked on
    torch 2.13: `parameters()` is empty, the buffer is the Parameter itself). The caller wrote
    `nn.Parameter(...)` to train that value, but an optimizer built over `parameters()` never
    holds it: it gets a gradient and never moves, silently (desy-ml/cheetah#302). Register a
    Parameter as a parameter: `self.register_parameter(name, t) if isinstance(t,
    nn.Parameter) else self.register_buffer(name, t)`.
    Known limits: the buffer's value is the `__init__` argument itself, through
    `torch.as_tensor` and device/dtype moves only; a call of the class in the file passes
    `nn.Parameter(...)` (or a name bound once to one) for it.
    """

    code = "GT490"
    name = "parameter-registered-as-buffer"
    message = ("`{cls}.__init__` registers its argument `{arg}` as the buffer `{buf}`, and the "
               "call at line {line} passes an `nn.Parameter` for it: a buffer is not in "
               "`parameters()`, so no optimizer built from them trains it; register a "
               "Parameter with `register_parameter`")
    triggers = ("register_buffer",)
    examples = [
        Bad("""
            import torch
            from torch import nn

            class Scale(nn.Module):
                def __init__(self, gain):
                    super().__init__()
                    self.register_buffer("gain", torch.as_tensor(gain))

                def forward(self, x):
                    return x * self.gain

            layer = Scale(nn.Parameter(torch.tensor(2.0)))
            opt = torch.optim.SGD(layer.parameters(), lr=0.1)
            """, at=(7, 8)),
        Good("""
            import torch
            from torch import nn

            class Scale(nn.Module):
                def __init__(self, gain):
                    super().__init__()
                    if isinstance(gain, nn.Parameter):
                        self.register_parameter("gain", gain)
                    else:
                        self.register_buffer("gain", torch.as_tensor(gain))

                def forward(self, x):
                    return x * self.gain

            layer = Scale(nn.Parameter(torch.tensor(2.0)))
            opt = torch.optim.SGD(layer.parameters(), lr=0.1)
            """),
        Good("""
            import torch
            from torch import nn

            class Scale(nn.Module):
                def __init__(self, gain):
                    super().__init__()
                    self.register_buffer("gain", torch.as_tensor(gain))

                def forward(self, x):
                    return x * self.gain

            layer = Scale(torch.tensor(2.0))
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        an = ctx.analysis
        for info in list(an.classes.values()):
            init = info.methods.get("__init__")
            if not info.is_module or init is None:
                continue
            a = init.args
            params = {x.arg for x in (*a.posonlyargs, *a.args[1:], *a.kwonlyargs)}
            for call in (n for n in ast.walk(init) if isinstance(n, ast.Call)):
                f = call.func
                if not (isinstance(f, ast.Attribute) and f.attr == "register_buffer"
                        and isinstance(f.value, ast.Name) and f.value.id == "self"
                        and len(call.args) >= 2 and isinstance(call.args[0], ast.Constant)):
                    continue
                arg = _argument_kept(call.args[1], ctx)
                if arg is None or arg not in params or ctx.scope(init).bindings_before(
                        arg, call.lineno) and any(b.stmt is not init for b in ctx.scope(
                            init).bindings_before(arg, call.lineno)):
                    continue
                if _type_tested(init, arg):
                    continue  # `if isinstance(gain, nn.Parameter): register_parameter(...)`
                site = next(((v, w) for v, w in an.argument_values(init, arg)
                             if _is_parameter(v, w, v.lineno, ctx)), None)
                if site is None:
                    continue
                v, _ = site
                yield self.report(call, ctx, related=(Related(
                    ctx.path, v.lineno, f"an `nn.Parameter` is passed for `{arg}` here",
                    ctx.column(v)),), cls=info.name, arg=arg,
                    buf=call.args[0].value, line=v.lineno)
