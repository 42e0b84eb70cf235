"""GT710, GT711: module hooks that do not see what their code assumes."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import param_kind
from gradtrace.lint.analysis.calls import ascii_code
from gradtrace.lint.analysis.kinds import Kind
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._owners import owners

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
MODULE_HOOKS = frozenset({"register_forward_hook", "register_forward_pre_hook",
                          "register_backward_hook", "register_full_backward_hook",
                          "register_full_backward_pre_hook"})
CONTAINERS = frozenset({"torch.nn.Sequential"})


def _ops(fn: ast.AST) -> int:
    """How many tensor operations a ``forward`` spells (calls and arithmetic), roughly."""
    return sum(isinstance(n, ast.BinOp) or isinstance(n, ast.Call) and not (
        isinstance(n.func, ast.Name) and n.func.id in ("super", "len", "isinstance", "range"))
        for n in walk(fn))


def _hook_function(ctx: Context, arg: ast.AST, where: ast.AST | None
                   ) -> tuple[ast.AST, list[str]] | None:
    """The hook a ``register_*_hook(arg)`` call installs and its parameters past ``self``."""
    if isinstance(arg, ast.Lambda):
        return arg, [a.arg for a in arg.args.args]
    fn: ast.AST | None = None
    method = False
    if isinstance(arg, ast.Name):
        fn = next((n for n in walk(where) if isinstance(n, FUNCS) and n.name == arg.id
                   and n is not where), None) if where is not None else None
        fn = fn or ctx.analysis.functions.get(arg.id)
    elif isinstance(arg, ast.Attribute) and dotted(arg.value) == "self":
        cls = ctx.analysis.class_of(where)
        fn, method = (cls.methods.get(arg.attr) if cls is not None else None), True
    if not isinstance(fn, FUNCS):
        return None
    names = [a.arg for a in fn.args.args]
    return fn, names[1:] if method else names


def _multi_node_class(ctx: Context, call: ast.Call, where: ast.AST | None) -> str | None:
    """The class of the hooked module when its forward spells several operations (a class of
    this file) or is a container."""
    recv = call.func.value  # type: ignore[attr-defined]
    cls_name: str | None = None
    if dotted(recv) == "self":
        info = ctx.analysis.class_of(where)
        cls_name = info.name if info is not None and info.is_module else None
    else:
        k = ctx.analysis.kind_in(recv, where or ctx.tree, call.lineno) or _passed(
            ctx, recv, where)
        if k is not None and k.is_module:
            cls_name = k.cls
    if cls_name in CONTAINERS:
        return cls_name
    info = ctx.analysis.classes.get(cls_name or "")
    fwd = info.methods.get("forward") if info is not None and info.is_module else None
    return cls_name if fwd is not None and _ops(fwd) >= 2 else None


def _passed(ctx: Context, recv: ast.AST, where: ast.AST | None) -> Kind | None:
    """The kind of ``net.body`` when ``net`` is a parameter every caller passes a module of
    this file for: through the class's attribute kinds."""
    chain: list[str] = []
    while isinstance(recv, ast.Attribute):
        chain.insert(0, recv.attr)
        recv = recv.value
    if not isinstance(recv, ast.Name) or where is None:
        return None
    k = param_kind(ctx.analysis, where, recv.id)
    for attr in chain:
        info = ctx.analysis.classes.get(k.cls or "") if k is not None and k.is_module else None
        k = info.attr_kind(attr) if info is not None else None
    return k


class LegacyBackwardHookGradInput(Rule):
    """`register_backward_hook` (the non-full module hook) on a module whose forward runs
    several operations, with a hook that reads or replaces `grad_input`.

    Why: the legacy hook is attached to the last autograd node the module's forward creates,
    so `grad_input` holds the gradients of that node's inputs, not of the module's inputs. For
    `x + y + z` it has 2 entries, not 3 (pytorch#598); for a residual block it is the gradient
    at the final ReLU's input, not at the block's input (pytorch#7040); a hook that returns a
    new `grad_input` replaces the gradients of that last node only. torch 2.13 warns
    "Using a non-full backward hook when the forward contains multiple autograd Nodes is
    deprecated ... This hook will be missing some grad_input" at the first backward, and the
    saliency map, gradient statistic or clipping built on it is silently wrong. Use
    `register_full_backward_hook`: its `grad_input` is one entry per module input.
    Known limits: the module must be `self` inside a module class of the file, or a name
    whose kind is such a module (or an `nn.Sequential`), whose `forward` spells two
    operations or more; a hook that reads only `grad_output` is not reported.
    """

    code = "GT710"
    name = "legacy-backward-hook-grad-input"
    message = ("`{call}` installs a non-full backward hook on `{cls}`, whose forward runs "
               "several operations: the hook's `{param}` holds the gradients of the last "
               "operation's inputs, not of the module's inputs; use "
               "`register_full_backward_hook`")
    triggers = ("register_backward_hook",)
    examples = [
        Bad("""
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)

                def forward(self, x):
                    return nn.functional.relu(self.fc(x) + x)

            saved = {}
            block = Block()
            block.register_backward_hook(lambda m, gin, gout: saved.update(x=gin[0]))
            """, at=(13, 0)),
        Good("""
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)

                def forward(self, x):
                    return nn.functional.relu(self.fc(x) + x)

            saved = {}
            block = Block()
            block.register_full_backward_hook(lambda m, gin, gout: saved.update(x=gin[0]))
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        owner = owners(ctx)
        for n in walk(node):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "register_backward_hook" and n.args):
                continue
            where = owner.get(id(n))
            hook = _hook_function(ctx, n.args[0], where if isinstance(where, FUNCS) else None)
            if hook is None or len(hook[1]) < 3:
                continue
            fn, params = hook
            gin = params[1]
            body = [fn.body] if isinstance(fn, ast.Lambda) else fn.body  # type: ignore[attr-defined]
            reads = any(isinstance(x, ast.Name) and x.id == gin and isinstance(x.ctx, ast.Load)
                        for s in body for x in walk(s))
            if not reads:
                continue
            cls = _multi_node_class(ctx, n, where)
            if cls is None:
                continue
            yield self.report(n, ctx, call=ctx.source(n.func), cls=cls.rpartition(".")[2],
                              param=gin)


def _key(e: ast.AST) -> str | None:
    """``model``, ``self.enc``, ``net[0]``: the spelling of a module a hook and a call share."""
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
        base = dotted(e.value)
        return f"{base}[{e.slice.value!r}]" if base else None
    return dotted(e)


class ForwardCallSkipsHooks(Rule):
    """A module with a hook registered on it is run as `module.forward(x)`.

    Why: module hooks (`register_forward_hook`, `register_full_backward_hook`, ...) are run by
    `nn.Module.__call__`; calling `forward` directly skips them, and the gradient still
    flows. The hook's record stays empty, or its gradient clipping or feature capture never
    happens, and nothing fails (pytorch#117925). Call the module: `module(x)`.
    Known limits: the hook and the `.forward(...)` call must name the module the same way
    (`model`, `self.encoder`) in one function or at module level, or (`self.<attr>`) in two
    methods of one class.
    """

    code = "GT711"
    name = "forward-call-skips-hooks"
    message = ("`{call}` calls `forward` directly, so the hook registered on `{mod}` at line "
               "{line} never runs; call the module: `{mod}(...)`")
    triggers = ("_hook",)
    examples = [
        Bad("""
            import torch.nn as nn

            def features(model, x):
                feats = []
                model.layer.register_forward_hook(lambda m, i, o: feats.append(o))
                model.layer.forward(x)
                return feats
            """, at=(6, 4)),
        Good("""
            import torch.nn as nn

            def features(model, x):
                feats = []
                model.layer.register_forward_hook(lambda m, i, o: feats.append(o))
                model(x)
                return feats
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if ascii_code(ctx) and not ctx.mentions(*MODULE_HOOKS):
            return  # no module hook is registered (its name is spelled in ASCII code): no walk
        hooked: list[tuple[ast.Call, str]] = []
        forwards: list[tuple[ast.Call, str]] = []
        for n in of_types(node, (ast.Call,)):
            if not (isinstance(n.func, ast.Attribute)
                    and (n.func.attr in MODULE_HOOKS or n.func.attr == "forward")):
                continue
            name = _key(n.func.value)
            if name is None or name == "self":
                continue
            (forwards if n.func.attr == "forward" else hooked).append((n, name))
        if not hooked or not forwards:
            return  # the owners map is built only for a file with both
        owner = owners(ctx)
        hooks: dict[tuple[int, str], ast.Call] = {}
        for n, name in hooked:
            hooks.setdefault((id(owner.get(id(n))), name), n)
            if name.startswith("self.") and (c := self._class(ctx, owner, n)) is not None:
                hooks.setdefault((id(c), name), n)  # any method of the class
        for call, name in forwards:
            cls = self._class(ctx, owner, call) if name.startswith("self.") else None
            hook = hooks.get((id(owner.get(id(call))), name)) or hooks.get((id(node), name)) \
                or (hooks.get((id(cls), name)) if cls is not None else None)
            if hook is None or (owner.get(id(hook)) is owner.get(id(call))
                                and hook.lineno > call.lineno):
                continue
            yield self.report(call, ctx, call=ctx.source(call)[:60], mod=name,
                              line=hook.lineno, related=(Related(
                                  ctx.path, hook.lineno, "the hook is registered here",
                                  ctx.column(hook)),))

    @staticmethod
    def _class(ctx: Context, owner: dict[int, ast.AST], n: ast.AST) -> ast.ClassDef | None:
        info = ctx.analysis.class_of(owner.get(id(n)))
        return info.node if info is not None else None
