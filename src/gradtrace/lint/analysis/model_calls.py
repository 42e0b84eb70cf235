"""The one recogniser of a model call: which calls run a module's forward (and so may put a
graph on their result).

A callee runs a model when its name is bound to an ``nn.Module`` here or at module level
(:func:`bound_module`, from the kinds of :mod:`gradtrace.lint.flow`), when it is a forward
method of such an object (``vae.encode(x)``), or, as the fallback, when it is spelled like a
module (:func:`~gradtrace.lint.analysis.vocabulary.model_spelling`: ``netG``, ``self.encoder``);
never when it builds an object of a class of the file (:func:`runs_model`). :func:`model_calls`
lists the calls of an expression that could be one, outside detached parts (in the GT5
dependency walk: NOTE [graph-carrying bindings]).
"""
from __future__ import annotations

import ast
import sys
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.cuts import (
    DETACHING_METHODS, NON_VALUE_ATTRS, NUMBER_FUNCS, TENSOR_METHODS)
from gradtrace.lint.analysis.vocabulary import CLASS_RE, FORWARD_METHODS, model_spelling
from gradtrace.lint.flow import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def bound_module(ctx: Context, scope: Scope, name: str | None, line: int) -> bool:
    """Whether ``name`` is bound to an ``nn.Module`` in ``scope`` before ``line``, or else at
    module level."""
    if not name:
        return False
    for sc in (scope, ctx.scope(ctx.tree)):
        b = sc.binding_before(name, line)
        if b is not None:
            return b.kind == MODULE
    return False


def module_like(ctx: Context, scope: Scope, callee: str, line: int) -> bool:
    """A callee bound to a module, a forward method of one, or spelled like one; in a method
    of an ``nn.Module`` class of the file, ``self(x)`` and ``self.forward(x)`` too (MetaRec's
    ``train_one_epoch`` method)."""
    if bound_module(ctx, scope, callee, line):
        return True
    if callee in ("self", "self.forward"):
        return id(scope.node) in ctx.memo("module-methods", ctx.tree, lambda: {
            id(m) for c in ctx.analysis.classes.values() if c.is_module
            for m in c.methods.values()})
    owner, _, last = callee.rpartition(".")
    if last in FORWARD_METHODS and owner:  # `vae.encode(x)`, `clip.get_text_features(t)`
        return bound_module(ctx, scope, owner, line) or model_spelling(owner.rpartition(".")[2])
    return model_spelling(last) and not _other_library(ctx, scope, callee, line) \
        and not _standard_library(ctx, scope, callee, line) \
        and not _torch_alias(ctx, scope, callee, line)


def _standard_library(ctx: Context, scope: Scope, callee: str, line: int) -> bool:
    """``callee`` is a function of Python's standard library by the file's imports
    (``importlib.util.module_from_spec``, ``copy.deepcopy``): it runs no torch module, however
    its name reads (NOTE [standard library callees]). A name bound in the function
    shadows the import."""
    root = callee.partition(".")[0]
    if not ctx.imports.is_imported(root) or scope.binding_before(root, line) is not None \
            and scope.node is not ctx.tree:
        return False
    return ctx.imports.aliases[root].partition(".")[0] in sys.stdlib_module_names


def _torch_alias(ctx: Context, scope: Scope, callee: str, line: int) -> bool:
    """``callee`` is a bare name the file imports from torch under another name
    (``from torch.autograd import Variable as V``): torch's own callable, whatever its
    spelling reads (NOTE [standard library callees]). A name bound in the function shadows
    the import."""
    if "." in callee or not ctx.imports.is_imported(callee) \
            or scope.binding_before(callee, line) is not None and scope.node is not ctx.tree:
        return False
    return ctx.imports.aliases[callee].startswith("torch.")


# NOTE [standard library callees]
# The fallback that reads a callee's spelling (`model_spelling`: "module", "net", "encoder")
# never applies to a function the file imports from Python's standard library
# (`sys.stdlib_module_names`): `importlib.util.module_from_spec(spec)` loads a config module,
# `copy.deepcopy(model)` copies one; neither runs a forward, so neither puts a graph on its
# result (CoinCheung's DeepLab `train.py`: the config module loaded before the loop is no
# graph the first backward frees). Nor to a name imported from torch under an alias
# (`from torch.autograd import Variable as V`: `V(x, requires_grad=True)` reads like a value
# network but makes a new leaf, so an attack loop's `x = V(x, ...)` carries no graph into the
# next pass; unseen54a, 1nAzureSky's deep-hashing attack).


# array libraries whose functions and compiled callables make no torch graph
OTHER_LIBRARIES = ("jax.", "flax.", "tensorflow.", "keras.", "numpy.", "sklearn.")


def _other_library(ctx: Context, scope: Scope, callee: str, line: int) -> bool:
    """``callee`` is a name bound (in the function, or once at the module level) to what a
    function of another array library returns: ``apply_resnet = jax.jit(lambda x: ...)``
    computes with JAX, whatever its name says."""
    if "." in callee:
        return False
    b = scope.binding_before(callee, line)
    if b is None and scope.node is not ctx.tree:
        top = ctx.scope(ctx.tree).bindings.get(callee, ())
        b = top[0] if len(top) == 1 else None
    v = getattr(b, "value", None)
    return isinstance(v, ast.Call) and (ctx.qualified_name(v.func) or "").startswith(
        OTHER_LIBRARIES)


def calls_module(c: ast.Call, scope: Scope, ctx: Context) -> bool:
    """``c`` calls an object whose kind is a module, or a method of one (``policy(s)``,
    ``self.critic(s)``, ``self.net.act(s)``): from the kinds alone, no spelling."""
    for e in (c.func, c.func.value if isinstance(c.func, ast.Attribute) else None):
        k = ctx.analysis.kind(e, scope, c.lineno) if e is not None else None
        if k is not None and k.what == MODULE:
            return True
    return False


def runs_model(ctx: Context, scope: Scope, callee: str, line: int) -> bool:
    """A module-like call, unless it builds an object of a class of this file
    (``model = GAT(...)``: an acronym escapes ``CLASS_RE``) or of a class another file of the
    project defines (Raindrop's ``GRU_unit_cluster(10, n)`` imported from its ``models.py``:
    NOTE [project index])."""
    return module_like(ctx, scope, callee, line) and callee not in ctx.analysis.classes \
        and not _foreign_class(ctx, callee)


def _foreign_class(ctx: Context, callee: str) -> bool:
    """``callee`` (a dotted name) names a class defined in another file of the project."""
    from gradtrace.lint.analysis.project import foreign_def
    try:
        expr = ast.parse(callee, mode="eval").body
    except SyntaxError:
        return False
    got = ctx.memo(f"foreign-class:{callee}", ctx.tree, lambda: foreign_def(ctx, expr))
    return got is not None and isinstance(got[1], ast.ClassDef)


def model_calls(expr: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """Calls in ``expr`` (outside detached parts) whose callee looks like a module."""
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in DETACHING_METHODS:
                continue
            if isinstance(f, ast.Name) and f.id in NUMBER_FUNCS:
                continue
            callee = dotted(f)
            last = callee.rpartition(".")[2] if callee else ""
            method = isinstance(f, ast.Attribute) and f.attr in TENSOR_METHODS
            if callee and not CLASS_RE.match(last) and not method \
                    and not callee.startswith(("torch.", "F.", "nn.", "np.", "math.")):
                yield callee, n
            stack.extend(child_nodes(n))
        elif isinstance(n, ast.Attribute) and n.attr in NON_VALUE_ATTRS:
            continue  # `predict(model, x).data`, `net(x).shape`: no graph of the call is kept
        elif not isinstance(n, (ast.Lambda, ast.expr_context, ast.Compare)):
            stack.extend(child_nodes(n))
