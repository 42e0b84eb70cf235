"""GT478: ``hasattr`` asks a DistributedDataParallel wrapper for a method of the module it wraps.

# NOTE [wrapper hides the module's methods]
``DistributedDataParallel`` forwards ``__call__`` to the wrapped module, but not its other
attributes: a method the model class defines (``no_weight_decay``, ``get_param_groups``) is on
``ddp.module``, not on ``ddp``, so ``hasattr(ddp, "no_weight_decay")`` is False and
``getattr(ddp, "no_weight_decay", None)`` is the default. Code that reads such an exemption
through ``hasattr`` (timm's ``create_optimizer`` and the copies of it in training scripts)
silently takes its fallback: ``pos_embed`` and ``cls_token`` are weight-decayed (checked on
torch 2.13). The wrapper is followed across calls (NOTE [ddp facts]): the ``hasattr`` may be in
a function of the file that a call hands the wrapper to; the attribute must be a method the
wrapped class of the file defines (its own or a base's of the file) and not one of
``nn.Module``'s own.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import (
    TRIGGERS, Wrap, _base_method, _calls_of, holds_wrapper, wrapped_class,
)

# the names nn.Module (and so the wrapper) answers itself
MODULE_OWN = frozenset({
    "forward", "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "state_dict", "load_state_dict", "train",
    "eval", "to", "cuda", "cpu", "float", "double", "half", "bfloat16", "type", "apply",
    "zero_grad", "requires_grad_", "register_buffer", "register_parameter", "add_module",
    "register_module", "get_submodule", "get_parameter", "get_buffer", "extra_repr",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_backward_hook", "share_memory", "to_empty", "ipu", "xpu", "mtia", "compile",
    "training", "module", "no_sync", "join", "join_hook", "register_comm_hook"})


def _asked(call: ast.Call) -> tuple[str, str] | None:
    """(the name asked, the attribute) of ``hasattr(name, "attr")`` /
    ``getattr(name, "attr", default)``."""
    f = call.func
    if not (isinstance(f, ast.Name) and f.id in ("hasattr", "getattr")) or call.keywords:
        return None
    if len(call.args) != (2 if f.id == "hasattr" else 3):
        return None
    who, what = call.args[0], call.args[1]
    if isinstance(who, ast.Name) and isinstance(what, ast.Constant) \
            and isinstance(what.value, str) and what.value not in MODULE_OWN:
        return who.id, what.value
    return None


class HasattrOnDdpWrapper(Rule):
    """`hasattr` (or `getattr` with a default) asks a DDP wrapper for a method of the model.

    Why: `DistributedDataParallel` runs the wrapped module's `forward` but does not expose its
    other methods: `hasattr(ddp_model, "no_weight_decay")` is False although the model defines
    it, so the code takes its fallback silently (timm's `create_optimizer(args, model)` given
    the wrapper puts `pos_embed`/`cls_token` in the weight-decayed group; checked on torch
    2.13: NOTE [wrapper hides the module's methods]). Hand the unwrapped model
    (`model.module`, `model_without_ddp`) to that code.
    Known limits: the wrapper is a `DistributedDataParallel(...)` of a module class of the file
    that defines the method; the call is in the function that binds the wrapper or in a
    function of the file a call hands it to (reported at that call).
    """

    code = "GT478"
    gate_statements = True
    name = "hasattr-on-ddp-wrapper"
    message = ("`{name}` is a DistributedDataParallel wrapper of `{cls}`: `{ask}` asks the "
               "wrapper, which does not expose `{cls}.{attr}`, so it {answer}; pass the "
               "wrapped module (`{name}.module`)")
    triggers = ("hasattr", "getattr")
    examples = [
        Bad("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            class Net(torch.nn.Module):
                def no_weight_decay(self):
                    return {"pos"}

            def groups(model):
                skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
                return [{"params": [p for n, p in model.named_parameters() if n not in skip]}]

            model = DDP(Net())
            opt = torch.optim.AdamW(groups(model), weight_decay=0.05)
            """, at=(13, 0)),
        Good("""
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            class Net(torch.nn.Module):
                def no_weight_decay(self):
                    return {"pos"}

            def groups(model):
                skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
                return [{"params": [p for n, p in model.named_parameters() if n not in skip]}]

            model = DDP(Net())
            opt = torch.optim.AdamW(groups(model.module), weight_decay=0.05)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        asked = _asked(node)
        if asked is None or not ctx.mentions(*TRIGGERS):
            return
        name, attr = asked
        fn = ctx.function if ctx.function is not None else ctx.tree
        b = ctx.scope(fn).binding_before(name, node.lineno)
        w = holds_wrapper(name, fn, node.lineno, ctx)
        if w is None:
            return
        cls = wrapped_class(w, ctx)
        if cls is None or _base_method(cls, attr, ctx) is None:
            return
        site: ast.AST = ctx.statement if ctx.statement is not None else node
        related = [Related(ctx.path, w.line, "the wrapper is made here", ctx.column(w.call))]
        if b is None and isinstance(fn, FUNCTION_TYPES):
            passing = self._passing_call(fn, name, w, ctx)
            if passing is None:
                return
            related.insert(0, Related(ctx.path, node.lineno, f"`{ctx.source(node)[:50]}` in "
                                      f"`{fn.name}`", ctx.column(node)))
            site = passing
        answer = "is False" if isinstance(node.func, ast.Name) and node.func.id == "hasattr" \
            else "gives the default"
        yield self.report(site, ctx, related=related, name=name, cls=cls.node.name,
                          ask=ctx.source(node)[:50], attr=attr, answer=answer)

    @staticmethod
    def _passing_call(fn: ast.AST, param: str, w: Wrap, ctx: Context) -> ast.AST | None:
        """The statement of the call that hands the wrapper ``w`` to ``fn``'s ``param``."""
        for owner, call in _calls_of(fn, ctx):
            arg = ctx.analysis.arguments(fn, call).get(param)  # type: ignore[arg-type]
            if isinstance(arg, ast.Name) and holds_wrapper(arg.id, owner, call.lineno, ctx) is w:
                return owner_statement(owner, call, ctx)
            if isinstance(arg, ast.Call) and arg is w.call:
                return owner_statement(owner, call, ctx)
        return None


def owner_statement(owner: ast.AST, call: ast.Call, ctx: Context) -> ast.AST:
    s = ctx.scope(owner).statement_of(call)
    return s if s is not None else call
