"""Grad-mode contexts read from the syntax (no_grad, enable_grad, inference_mode,
set_grad_enabled) and the statement types the walkers share; below both
:mod:`gradtrace.lint.context` and :mod:`gradtrace.lint.flow`, so neither imports the other."""
from __future__ import annotations

import ast

from gradtrace.lint.names import Imports

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)

# Grad-mode words: "off" = no_grad / set_grad_enabled(False); "inference" = inference_mode();
# "on" = enable_grad / set_grad_enabled(True); "reset" = inference_mode(False).
GRAD_CONTEXTS = {
    "torch.no_grad": "off",
    "torch.enable_grad": "on",
    "torch.inference_mode": "inference",
    "torch.set_grad_enabled": "set",
}


def grad_mode_of(expr: ast.expr, imports: Imports) -> str | None:
    """"off" | "on" | "inference" | "reset" for a grad-mode context expression or decorator, else None."""
    call = expr if isinstance(expr, ast.Call) else None
    target = call.func if call else expr
    kind = GRAD_CONTEXTS.get(imports.qualified_name(target) or "")
    if kind is None:
        return None
    args = call.args if call else []
    flag = args[0] if args else None
    if call and flag is None:
        for kw in call.keywords:
            if kw.arg in ("mode", "enabled"):
                flag = kw.value
    if kind == "set":
        if isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
            return "on" if flag.value else "off"
        return None  # set_grad_enabled(is_train): unknown
    if kind == "inference" and isinstance(flag, ast.Constant) and flag.value is False:
        return "reset"  # inference_mode(False) turns grad on even inside no_grad
    return kind


def disabling_node(modes: list[tuple[ast.AST, str]]) -> ast.AST | None:
    """The node that leaves grad off at the end of a stack of modes, or None if grad is on.

    Innermost wins, except that ``enable_grad`` does not re-enable inside ``inference_mode``
    (pytorch-facts.md#grad-mode-nesting); ``inference_mode(False)`` re-enables in every case.
    """
    for i in range(len(modes) - 1, -1, -1):
        node, mode = modes[i]
        if mode in ("off", "inference"):
            return node
        if mode == "reset":
            return None
        if mode == "on":
            for outer, outer_mode in reversed(modes[:i]):
                if outer_mode == "reset":
                    return None
                if outer_mode == "inference":
                    return outer
            return None
    return None


def chooses_mode(expr: ast.expr, imports: Imports) -> bool:
    """A grad-mode context, its flag known or not (``set_grad_enabled(is_training)``): the
    block it opens runs in a mode of its own choosing, whatever grad mode the caller set."""
    return grad_mode_of(expr, imports) is not None or isinstance(expr, ast.Call) and \
        GRAD_CONTEXTS.get(imports.qualified_name(expr.func) or "") == "set"


def turns_on_inside(expr: ast.expr, imports: Imports, outer: str | None) -> bool:
    """Whether a ``with expr:`` nested in a block of grad mode ``outer`` may run its body
    with grad on: ``inference_mode(False)`` always; ``enable_grad`` or ``set_grad_enabled``
    (true or a flag) under ``no_grad``, not under ``inference_mode``
    (pytorch-facts.md#grad-mode-nesting)."""
    mode = grad_mode_of(expr, imports)
    return mode == "reset" or outer == "off" and (mode == "on" or mode is None and chooses_mode(
        expr, imports))
