"""Module classes of a file that the project runs only for inference.

# NOTE [run only for inference]
A scene-graph head's post-processor (``class PostProcessor(nn.Module)`` whose ``forward`` does
``obj_class_prob = F.softmax(obj_logit, -1); obj_class_prob[:, 0] = 0``) writes into an op's
saved output, and a module's ``forward`` reads as trained (GT602, GT603). Its file never
builds it: the head of another file does (``self.post_processor = PostProcessor()``) and calls
it only to turn the logits into the final boxes and triplets. :func:`run_for_inference` says
so when the checked file builds no instance of the class, the project's other files call its
instances (the reverse index, NOTE [reverse index]) at one site at least, and every such call
runs where backward cannot follow:

* grad off there (``no_grad``, a grad-off decorator), or in the body of ``if not
  self.training:`` / the ``else`` of ``if self.training:`` of the enclosing function;
* in a function named for inference (``relation_simple_test``, ``predict``: vocabulary);
* in a function (OpenPSG's ``get_result``) whose own calls, in its file and in the others,
  are each one of the above (one hop; a method's calls are every ``x.name(...)``, an
  over-approximation that keeps *every call* sound).

Unknown (a buffer, a large project, too many readers, a name read as a value, no call): the
class is trained. Asked only for a write GT602/GT603 would report in a module's ``forward``,
once per class and file.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import foreign_sites
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.grad_sources import is_inference_function
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def run_for_inference(ctx: Context, cls: ast.ClassDef) -> bool:
    """NOTE [run only for inference]."""
    return ctx.memo("inference-runs", cls, lambda: _only_inference(ctx, cls))


def _only_inference(ctx: Context, cls: ast.ClassDef) -> bool:
    if cls not in ctx.tree.body or call_sites(ctx, cls.name):
        return False  # built in its own file: the file's own facts decide
    sites = foreign_sites(ctx, cls)
    if not sites:
        return False
    for site in sites:
        if site.off or _inference_at(site.ctx, site.call, site.where):
            continue
        if not _callers_infer(site.ctx, site.where):
            return False
    return True


def _inference_at(octx: Context, call: ast.Call, where: ast.AST) -> bool:
    """``call`` runs in an inference function or an eval-only branch of ``where``."""
    if is_inference_function(where, octx):
        return True
    if not isinstance(where, FUNCTION_TYPES):
        return False
    return _in_eval_branch(where.body, call)


def _in_eval_branch(body: list[ast.stmt], call: ast.Call) -> bool:
    """``call`` sits in ``if not self.training:``'s body or ``if self.training:``'s else."""
    for s in body:
        if not (s.lineno <= call.lineno <= (s.end_lineno or s.lineno)):
            continue
        if isinstance(s, ast.If) and _training_test(s.test) is not None:
            negated = _training_test(s.test)
            arm = s.body if negated else s.orelse
            if any(a.lineno <= call.lineno <= (a.end_lineno or a.lineno) for a in arm):
                return True
        if isinstance(s, FUNCTION_TYPES + (ast.ClassDef,)):
            return False
        inner = [x for f in ("body", "orelse", "finalbody") for x in getattr(s, f, ())]
        inner += [x for h in getattr(s, "handlers", ()) for x in h.body]
        return _in_eval_branch(inner, call)
    return False


def _training_test(test: ast.expr) -> bool | None:
    """``not self.training`` -> True, ``self.training`` -> False, anything else None."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    node = test.operand if negated else test  # type: ignore[attr-defined]
    if isinstance(node, ast.Attribute) and node.attr == "training" \
            and isinstance(node.value, ast.Name) and node.value.id == "self":
        return negated
    return None


def _callers_infer(octx: Context, fn: ast.AST) -> bool:
    """Every call of the function ``fn`` of ``octx``'s file runs for inference (one hop)."""
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    local = [(c, next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), octx.tree))
             for c, _, outer in call_sites(octx, fn.name)]
    abroad = foreign_sites(octx, fn)
    if abroad is None or not local and not abroad:
        return False
    return all(_inference_at(octx, c, w) for c, w in local) and \
        all(s.off or _inference_at(s.ctx, s.call, s.where) for s in abroad)
