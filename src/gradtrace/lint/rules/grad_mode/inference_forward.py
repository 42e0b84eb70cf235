"""GT211: a module whose `forward` runs under `inference_mode`, called by training code."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.caller_trained import caller_backward
from gradtrace.lint.analysis.installed_forwards import installed_methods
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context, grad_mode_of
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.reach import decorated_off

HOOKS = frozenset({"register_forward_pre_hook", "register_forward_hook"})


class InferenceModeForward(Rule):
    """An `nn.Module` whose `forward` is decorated with `@torch.inference_mode()` is called
    by training code (another module's `forward`, a forward hook, or code that then runs
    `backward()`).

    Why: every tensor a function decorated with `inference_mode` returns is an *inference
    tensor*; unlike a `no_grad` result it may not take part in autograd at all. The first
    trainable op that saves it for backward (a convolution or linear layer on it, a product, a
    loss) raises `RuntimeError: Inference tensors cannot be saved for backward`
    (pytorch-facts.md#inference-tensors; facebookresearch/dinov2#472, where a padding module
    run as a forward pre-hook of the backbone did this). A preprocessing module that needs no
    gradient should use `@torch.no_grad()` (its output is an ordinary tensor), or the caller
    `.clone()` the result outside `inference_mode`.
    A method installed as an instance's `forward` (`net.forward = partial(net.features,
    n=4)`, NOTE [installed forwards]) is that instance's `forward`.
    Known limits: the module class must be in the same file, and the file must run
    `backward()`; a call site is training code when it sits in a `forward`, in a function (or
    lambda) registered with `register_forward_pre_hook`/`register_forward_hook`, before a
    `backward()` in its function, or in a function whose result a caller of the file
    backpropagates (NOTE [backpropagated through callers]), and not under
    `no_grad`/`inference_mode` itself.
    """

    code = "GT211"
    needs_step = True  # NOTE [step files]
    name = "inference-mode-forward"
    message = ("`{cls}.{method}`{installed} runs under `{mode}`, so its outputs are inference tensors, and "
               "training code calls it (line {line}): the first layer that saves one for "
               "backward raises `RuntimeError: Inference tensors cannot be saved for "
               "backward`; use `@torch.no_grad()` for a module that needs no gradient")
    triggers = ("inference_mode",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Standardize(nn.Module):
                @torch.inference_mode
                def forward(self, x):
                    return (x - x.mean()) / x.std()

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.prep = Standardize()
                    self.fc = nn.Linear(8, 1)

                def forward(self, x):
                    return self.fc(self.prep(x))

            def train(net, opt, x, y):
                ((net(x) - y) ** 2).mean().backward()
                opt.step()
            """, at=(5, 5)),
        Good("""
            import torch
            import torch.nn as nn

            class Standardize(nn.Module):
                @torch.no_grad()
                def forward(self, x):
                    return (x - x.mean()) / x.std()

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.prep = Standardize()
                    self.fc = nn.Linear(8, 1)

                def forward(self, x):
                    return self.fc(self.prep(x))

            def train(net, opt, x, y):
                ((net(x) - y) ** 2).mean().backward()
                opt.step()
            """),
        Good("""
            import torch
            import torch.nn as nn

            class Decoder(nn.Module):
                @torch.inference_mode()
                def forward(self, logits):
                    return logits.argmax(-1)

            def train(model, opt, x, y):
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()

            @torch.inference_mode()
            def predict(model, x):
                return Decoder()(model(x))
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.class_def
        if cls is None or not ctx.mentions("backward") or node.name != "forward" \
                and node.name not in installed_methods(ctx, cls.name):
            return
        deco = next((d for d in node.decorator_list
                     if grad_mode_of(d, ctx.imports) == "inference"), None)
        info = ctx.analysis.classes.get(cls.name)
        if deco is None or info is None or not info.is_module:
            return
        call = next(_training_calls(info, ctx), None)
        if call is not None:
            yield self.report(deco, ctx, related=[Related(
                ctx.path, call.lineno, "training code calls the module here", ctx.column(call))],
                cls=cls.name, mode="inference_mode", line=call.lineno, method=node.name,
                installed="" if node.name == "forward" else " (installed as `forward`)")

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def _training_calls(info: ClassInfo, ctx: Context) -> Iterator[ast.Call]:
    """Calls of an instance of ``info``'s class (``Cls(...)(x)``, ``self.prep(x)``, ``m(x)``)
    made by training code (see the rule's Known limits)."""
    for fn, hooked in _functions(ctx):
        for n in walk(fn):
            if isinstance(n, ast.Call) and _runs(n, info, fn, ctx) and \
                    _trains_at(fn, n, hooked, ctx):
                yield n


def _functions(ctx: Context) -> Iterator[tuple[ast.AST, bool]]:
    """Every function and lambda of the file, with whether it is registered as a forward
    hook (``m.register_forward_pre_hook(fn_or_lambda)``)."""
    hooked: set[int] = set()
    names: set[str] = set()
    for n in walk(ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in HOOKS and n.args:
            hooked.add(id(n.args[0]))
            if isinstance(n.args[0], ast.Name):
                names.add(n.args[0].id)
    yield ctx.tree, False  # a script's statements
    for n in walk(ctx.tree):
        if isinstance(n, (*FUNCTION_TYPES, ast.Lambda)):
            yield n, id(n) in hooked or getattr(n, "name", None) in names


def _runs(call: ast.Call, info: ClassInfo, fn: ast.AST, ctx: Context) -> bool:
    f = call.func
    if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == info.name:
        return True  # `Cls(...)(x)`
    if not isinstance(f, (ast.Name, ast.Attribute)) or isinstance(fn, ast.Lambda):
        return False
    k = ctx.analysis.kind_in(f, fn, call.lineno)
    return k is not None and k.what == MODULE and (k.cls or "").rpartition(".")[2] == info.name


def _trains_at(fn: ast.AST, call: ast.Call, hooked: bool, ctx: Context) -> bool:
    if isinstance(fn, ast.Lambda):
        return hooked
    if decorated_off(fn, ctx):
        return False
    scope = ctx.scope(fn)
    stmt = scope.statement_of(call)
    if stmt is None or scope.grad_off_at(stmt) is not None:
        return False
    if hooked or getattr(fn, "name", "") == "forward":
        return True
    return any(b.stmt.lineno >= stmt.lineno for b in step_calls(ctx, fn).losses()) \
        or isinstance(fn, FUNCTION_TYPES) and caller_backward(ctx, fn) is not None
