"""A saved output handed to a helper of the file that writes its parameter in place (GT602,
GT603): ``y = transformer(x)`` (a Tanh's output) then ``y = normalize_batch(y)`` whose body
runs ``batch.div_(255.0)`` (NOTE [parameter written in place]); or to an instance of a module
class of the file whose ``forward`` writes its input (``self.reducer(self.backbone(x))``, the
backbone ending in a ReLU, RESA's ``y = x; y.add_(...)``), named or unnamed."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.lint.analysis.grad_sources import is_inference_function
from gradtrace.lint.analysis.instance_calls import instance_calls
from gradtrace.lint.analysis.param_writes import ParamWrite, forward_writes, param_writes
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import DETACHED, LEAF, NUMBER, NUMPY
from gradtrace.lint.rules.inplace._ops import (
    SAVED_MODULES, SAVED_OUT, _LazyModules, _op_of_call, local_module,
)
from gradtrace.lint.rules.inplace._saved import (
    Producer, _eval_branch, _file_backwards, _path_to, _runs_as_forward,
)


@dataclass(frozen=True)
class HelperWrite:
    """``call`` (in statement ``site``) passes ``prod``'s output to a helper whose statement
    ``write.stmt`` writes it in place, before ``backward`` (the backward call, or True: a
    module's forward)."""

    prod: Producer
    call: ast.Call
    site: ast.stmt
    write: ParamWrite
    backward: ast.Call | bool


def helper_writes(ctx: Context) -> list[HelperWrite]:
    """Every :class:`HelperWrite` of the file, once per file (both rules read it); only in a
    file that runs a backward (the scan of every function costs too much elsewhere)."""
    if not ctx.mentions(".backward(", "autograd.grad(", "autograd.backward(") \
            or not _file_backwards(ctx):
        return []
    return ctx.memo("gt6-helper-writes", ctx.tree, lambda: list(_find(ctx)))


def _find(ctx: Context) -> Iterator[HelperWrite]:
    for name, writes in param_writes(ctx).items():
        for call, fn in ctx.analysis.call_sites(writes[0].fn):  # NOTE [call sites]
            for w in writes:
                got = _passed_output(call, w, fn, ctx)
                if got is not None:
                    yield got
    for cls, writes in forward_writes(ctx).items():
        for call, fn in instance_calls(ctx, cls):  # NOTE [instance calls]
            for w in writes:
                got = _passed_output(call, w, fn, ctx)
                if got is not None:
                    yield got


def _passed_output(call: ast.Call, w: ParamWrite, fn: ast.AST,
                   ctx: Context) -> HelperWrite | None:
    """The write when ``call``'s argument for ``w``'s parameter is a name bound to the output
    of an op that saves it, in code that trains (grad on, a backward after it or a forward)."""
    if w.index >= len(call.args) or not isinstance(call.args[w.index], (ast.Name, ast.Call)) \
            or any(isinstance(a, ast.Starred) for a in call.args[:w.index + 1]):
        return None
    arg = call.args[w.index]
    scope = ctx.scope(fn)
    site = scope.statement_of(call)
    if site is None:
        return None
    if isinstance(arg, ast.Call):  # the output handed on unnamed: `self.neck(self.body(x))`
        value: ast.AST = arg
    else:
        b = scope.binding_before(arg.id, site.lineno)
        if b is None or not isinstance(b.stmt, ast.Assign) or len(b.stmt.targets) != 1 \
                or not isinstance(b.value, ast.Call) or b.stmt.lineno >= site.lineno \
                or scope.grad_off_at(b.stmt) is not None:
            return None
        value = b.value
    if scope.grad_off_at(site) is not None:
        return None
    info = ctx.analysis.class_of(fn) if isinstance(fn, FUNCTION_TYPES) else None
    modules = ctx.memo("gt6-modules-all", info.node, lambda: _LazyModules(
        info.node, ctx, True)) if info is not None else _LazyModules(None, ctx, False)
    op = _op_of_call(value, ctx, modules, scope)
    if op is None or op not in SAVED_OUT or _no_graph(value, scope, ctx):  # type: ignore
        return None
    backward = _training(fn, site, ctx)
    if not backward:
        return None
    return HelperWrite(Producer(value, op.rstrip("_"), SAVED_OUT[op]), call, site, w,
                       backward)


def _no_graph(call: ast.Call, scope: object, ctx: Context) -> bool:
    """The op records nothing: a function or a parameterless activation module applied to a
    number, a NumPy array, a detached tensor or a leaf (a module of the file, or a library
    layer with weights, records its parameters whatever its input)."""
    f = call.func
    if isinstance(f, ast.Name):
        v = local_module(f, call.lineno, scope)
        if v is not None and (ctx.qualified_name(v.func) or "") not in SAVED_MODULES:
            return False
    arg = call.args[0] if call.args else (
        f.value if isinstance(f, ast.Attribute) else None)
    return arg is not None and scope.kind(arg) in (  # type: ignore[attr-defined]
        NUMBER, NUMPY, DETACHED, LEAF)


def _training(fn: ast.AST, site: ast.stmt, ctx: Context) -> ast.Call | bool:
    """A backward after ``site`` in ``fn`` (or the module body), or True in a module's
    ``forward`` outside its eval arm (``if not self.training:``, speedyspeech's rounding of
    the predicted durations: the arm runs in eval mode only, as ``_in_training`` reads a
    write of the forward itself); False in an inference function."""
    if isinstance(fn, FUNCTION_TYPES) and is_inference_function(fn, ctx):
        return False
    for sink in step_calls(ctx, fn).losses():
        if sink.call.lineno > (site.end_lineno or site.lineno):
            return sink.call
    info = ctx.analysis.class_of(fn) if isinstance(fn, FUNCTION_TYPES) else None
    return info is not None and _runs_as_forward(info.node, fn.name, ctx) \
        and not _eval_branch(_path_to(fn.body, site))  # type: ignore[attr-defined]
