"""The GT2 tracer that follows the file's helpers (:class:`HelperSources`).

A call that runs a function of the file (the analysis layer's
:meth:`~gradtrace.lint.analysis.facts.Analysis.local_callee`, as for GT1) is dead when the
function makes everything it returns under grad-off (:func:`.grad_off_returns.returns_off`),
data when it takes no argument and returns only what factories and constants make
(:func:`.origins.data_helper`), and live otherwise; the arguments it saves for backward
(:func:`.helper_saves.saved_params`) are read for inference tensors.

# NOTE [inference method of an instance]
An inference tensor is also the result of a method the file defines with
``@torch.inference_mode()`` called through an instance of its class (``ids =
model.generate(prompt)`` with ``model = LM()``: the analysis layer's
:func:`.reach.called_function`), when the method makes everything it returns there
(:func:`.grad_off_returns.returns_off`); only the inference reading follows it (whether a call
is live or dead stays the analysis layer's ``local_callee``, with one exception below).

# NOTE [method of an instance]
A call through an attribute that the analysis layer's ``local_callee`` does not resolve
(``loss = model.shared_step(batch)`` with ``model = Classifier()``) runs the method
:func:`.reach.called_function` names: when that method makes everything it returns with grad
off, the call is dead as a helper's is. A plain ``model(x)`` is not followed this way (the
forward's own rules read it).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_off_returns import returns_off
from gradtrace.lint.analysis.grad_sources import Dead, Deps, Tracer
from gradtrace.lint.analysis.helper_saves import saved_params
from gradtrace.lint.analysis.origins import data_helper
from gradtrace.lint.analysis.reach import called_function, off_mode
from gradtrace.lint.context import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


class HelperSources(Tracer):
    """:class:`~.grad_sources.Tracer`, following the calls of the file's functions."""

    def _through_helper(self, e: ast.Call, line: int, depth: int) -> Deps | None:
        fn = self.ctx.analysis.local_callee(e, self.scope, line)
        if fn is None and isinstance(e.func, ast.Attribute):
            fn = called_function(e, self.scope, line)  # NOTE [method of an instance]
        if fn is None:
            return None
        d = Deps()
        off = returns_off(self.ctx, fn)
        if off is not None:
            d.dead.append(Dead(e, off, off_mode(off, self.ctx), fn))
            return d
        if not e.args and not e.keywords and isinstance(fn, FUNCTION_TYPES) and \
                data_helper(self.ctx, fn):
            return d  # `x, y = get_batch()`: data made from constants, no graph
        d.live = True
        if isinstance(fn, FUNCTION_TYPES) and e.args:  # it may save an inference tensor
            saved = saved_params(self.ctx, fn)
            binds = self.ctx.analysis.arguments(fn, e) if saved else {}
            self._consume(e, [v for p, v in binds.items() if p in saved], line, d)
        return d

    def _helper_inference(self, call: ast.Call, line: int) -> Dead | None:
        fn = self.ctx.analysis.local_callee(call, self.scope, line) or called_function(
            call, self.scope, line)  # NOTE [inference method of an instance]
        off = returns_off(self.ctx, fn)
        if off is not None and off_mode(off, self.ctx) == "inference":
            return Dead(call, off, "inference", fn)
        return None


def grad_sources(ctx: Context, node: ast.AST) -> HelperSources:
    """The :class:`HelperSources` of the function or module ``node``, built once per file and
    shared by the GT2 rules."""
    return ctx.memo("gt2-sources", node, lambda: HelperSources(ctx, ctx.scope(node)))
