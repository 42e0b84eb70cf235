"""Diagnose an exception after the fact, from its message, its traceback and the session.

Used for errors raised outside torch calls (``'float' object has no attribute 'backward'``,
``'NoneType' object has no attribute 'zero_'``, optimizer construction errors) and as a fallback
for any catalogue entry.
"""
from __future__ import annotations

import ast
import linecache
import types
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern, match_message
from gradtrace.runtime.catalogue_crashes import TRACEBACK_ONLY
from gradtrace.runtime.trace.swapped_unpack import swapped_unpack
from gradtrace.runtime.frames import Site, column_at, is_internal

_NONE_METHODS = {"step", "zero_grad", "backward", "load_state_dict", "add_param_group"}


def user_tb_frame(exc: BaseException) -> tuple[types.FrameType, Site] | None:
    """The innermost traceback frame that is user code, with its failing line."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not is_internal(code) and (not code.co_filename.startswith("<")
                                      or linecache.getlines(code.co_filename)):  # IPython cells
            found = (tb.tb_frame, Site(code.co_filename, tb.tb_lineno, code.co_name,
                                       column_at(code, tb.tb_lasti, tb.tb_lineno)))
        tb = tb.tb_next
    return found


def diagnose_traceback(exc: BaseException, state: Any = None) -> list[Finding]:
    """Findings for ``exc`` from message + traceback (+ the session ``state`` if given)."""
    pats = match_message(f"{type(exc).__name__}: {exc}")
    if not pats:
        return []
    hit = user_tb_frame(exc)
    frame, site = hit if hit is not None else (None, None)
    for pat in pats:
        fn = _POSTHOC.get(pat.key)
        if fn is not None and frame is not None and site is not None:
            try:
                found = fn(pat, exc, frame, site, state)
            except Exception:  # a failed analysis falls back to the generic explanation
                found = []
            if found:
                return found
    pat = next((p for p in pats if p.key not in _POSTHOC_ONLY), None)
    if pat is None:  # a None that is not a .grad: not a gradient problem
        return []
    return [make(pat.finding_code, site, f"{pat.title}. {pat.explanation}", fix=pat.fix)]


def _stmt(site: Site) -> ast.AST | None:
    linecache.checkcache(site.path)
    text = linecache.getline(site.path, site.line).strip()
    for cand in (text, text.rstrip(":") + ": pass"):
        try:
            return ast.parse(cand)
        except SyntaxError:
            continue
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)  # a line of a statement written over several lines
    spans = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")
             and n.lineno <= site.line <= (n.end_lineno or n.lineno)] if tree else []
    return min(spans, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=None)


def _eval_chain(node: ast.AST, frame: types.FrameType) -> tuple[bool, Any]:
    """Evaluate a Name/Attribute/Subscript-by-constant chain in the frame; no calls."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in scope:
                return True, scope[node.id]
        return False, None
    if isinstance(node, ast.Attribute):
        ok, base = _eval_chain(node.value, frame)
        if ok:
            try:
                return True, getattr(base, node.attr)
            except Exception:
                return False, None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        ok, base = _eval_chain(node.value, frame)
        if ok:
            try:
                return True, base[node.slice.value]
            except Exception:
                return False, None
    return False, None


def _receivers(tree: ast.AST | None, attr: str) -> list[ast.expr]:
    if tree is None:
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == attr]


def _grad_none(pat: ErrorPattern, exc: BaseException, frame: types.FrameType, site: Site,
               state: Any) -> list[Finding]:
    attr = getattr(exc, "name", None) or str(exc).rsplit("'", 2)[-2]
    for recv in _receivers(_stmt(site), attr):
        if not (isinstance(recv, ast.Attribute) and recv.attr == "grad"):
            continue
        ok, t = _eval_chain(recv.value, frame)
        if ok and hasattr(t, "is_leaf"):
            from gradtrace.runtime.trace.grad_none import why_grad_none

            return [why_grad_none(pat, t, site, state, ast.unparse(recv.value))]
    from gradtrace.runtime.trace.hook_input import hook_input_none
    if (hooked := hook_input_none(pat, exc, state)) is not None:
        return [hooked]  # NOTE [hook input needs no grad]
    return _grad_read_before(pat, frame, site, state, attr)


def _grad_read_before(pat: ErrorPattern, frame: types.FrameType, site: Site, state: Any,
                      attr: str) -> list[Finding]:
    """``grad = x.grad`` earlier, then ``grad.<attr>`` fails on None: why that ``.grad`` is
    None (the read's line, as if the attribute had been used there)."""
    from gradtrace.runtime.catalogue import pattern
    from gradtrace.runtime.trace.diagnose_args import assignment_before
    from gradtrace.runtime.trace.grad_none import why_grad_none

    for recv in _receivers(_stmt(site), attr):
        if not isinstance(recv, ast.Name) or frame.f_locals.get(
                recv.id, frame.f_globals.get(recv.id, 0)) is not None:
            continue
        node = assignment_before(site, recv.id)
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.value, ast.Attribute) and node.value.attr == "grad"):
            continue
        ok, t = _eval_chain(node.value.value, frame)
        if ok and isinstance(getattr(t, "is_leaf", None), bool):
            read = Site(site.path, node.lineno, site.function, node.col_offset)
            return [why_grad_none(pattern("grad-none-attr"), t, read, state,
                                  ast.unparse(node.value.value))]
    return []


def _assignment_of(frame: types.FrameType, name: str, site: Site) -> Site | None:
    """The last line before ``site`` in the same function that assigns ``name``."""
    try:
        tree = ast.parse("".join(linecache.getlines(site.path)))
    except SyntaxError:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) \
                    and node.lineno <= site.line and (best is None or node.lineno > best):
                best = node.lineno
    return Site(site.path, best, site.function) if best else None


def _number_backward(pat: ErrorPattern, exc: BaseException, frame: types.FrameType,
                     site: Site, state: Any) -> list[Finding]:
    for recv in _receivers(_stmt(site), "backward"):
        ok, value = _eval_chain(recv, frame)
        if ok and isinstance(recv, ast.Name) and (sw := swapped_unpack(recv.id, value, frame,
                                                                       site)) is not None:
            # swapped_unpack.py: NOTE [results unpacked out of order]
            return [make(code_for("item-then-backward", pat.code), sw[0], f"`{recv.id}` is a "
                         f"{type(value).__name__}, and `{sw[1]}`, unpacked from the same call "
                         "here, is the one-number tensor with a graph: the results are unpacked "
                         "in another order than the call returns them", fix="unpack the "
                         "results in the order the function returns them",
                         related=[(site, "backward() was called on it here")])]
        hit = state.items.get(id(value)) if (ok and state is not None) else None
        if hit is not None and hit[0] is value:
            cut = hit[1]
            return [make(code_for("item-then-backward", pat.code), cut.site,
                         f"`{ast.unparse(recv)}` is a {type(value).__name__}: `{cut.op}()` here "
                         f"({src(cut.site)}) turned the loss into a Python number",
                         fix="keep the tensor for backward(); call .item() only for logging",
                         related=[(site, "backward() was called on it here")])]
        items = state.recent_items() if state is not None and ok and isinstance(
            value, (float, int)) else []
        if items:
            from gradtrace.runtime.trace.items import item_finding

            return [item_finding(items[0], f"`{ast.unparse(recv)}` is a {type(value).__name__}, "
                                 "not a tensor", pat.code, site)]
        if isinstance(recv, ast.Name):
            where = _assignment_of(frame, recv.id, site)
            if where is not None and where.line != site.line:
                return [make(code_for("item-then-backward", pat.code), where,
                             f"`{recv.id}` is a {type(value).__name__}, not a tensor; it got "
                             f"its value here ({src(where)})", fix=pat.fix,
                             related=[(site, "backward() was called on it here")])]
    return []


def _none_assigned(pat: ErrorPattern, exc: BaseException, frame: types.FrameType, site: Site,
                   state: Any) -> list[Finding]:
    tree = _stmt(site)
    if "not callable" in str(exc):
        names = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call)] if tree else []
        attr = "__call__"
    else:
        attr = getattr(exc, "name", None) or str(exc).rsplit("'", 2)[-2]
        names = _receivers(tree, attr)
    for recv in names:
        if not isinstance(recv, ast.Name):
            continue
        where = _none_assignment(site, recv.id)
        if where is not None:
            return [make(code_for("none-result-assigned", pat.code), where[0],
                         f"`{recv.id}` was replaced by the return value of `.{where[1]}()` here "
                         f"({src(where[0])}), which is not the object", fix=pat.fix,
                         related=[(site, f"using `{recv.id}` failed here")])]
    if attr == "__call__":
        return []
    # `x.grad.detach()` / `.cpu()` on None: why that `.grad` is None (the same as `.data`)
    from gradtrace.runtime.catalogue import pattern
    return _grad_none(pattern("grad-none-attr"), exc, frame, site, state)


def _none_assignment(site: Site, name: str) -> tuple[Site, str] | None:
    try:
        tree = ast.parse("".join(linecache.getlines(site.path)))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) \
                and node.value.func.attr in _NONE_METHODS \
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return Site(site.path, node.lineno, site.function), node.value.func.attr
    return None


def _optimizer_args(pat: ErrorPattern, exc: BaseException, frame: types.FrameType,
                    site: Site, state: Any) -> list[Finding]:
    from gradtrace.runtime.trace.records import created_site

    tree = _stmt(site)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args] if tree else []
    for call in calls:
        arg = call.args[0]
        if isinstance(arg, (ast.List, ast.Tuple)):
            pairs = [_eval_chain(_group_params(e), frame) for e in arg.elts]
            ok, value = all(p[0] for p in pairs), [p[1] for p in pairs]
        else:
            ok, value = _eval_chain(arg, frame)
        if not ok:
            continue
        if isinstance(value, types.GeneratorType):
            return [make(code_for("parameters-generator-consumed", pat.code), site,
                         f"`{ast.unparse(call.args[0])}` is a generator that "
                         "was already consumed (a generator can be iterated only once)",
                         fix="pass model.parameters() directly, or make a list once")]
        elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else []
        if isinstance(value, (list, tuple)) and any(isinstance(g, (dict, list, tuple)) for g in value):
            value, elts = _group_tensors(value), []  # parameter groups: their 'params'
        for k, t in enumerate(value if isinstance(value, (list, tuple)) else ()):
            if hasattr(t, "is_leaf") and not t.is_leaf:
                owner = _parametrized_owner(elts[k] if k < len(elts) else None, frame)
                if owner is not None:  # `layer.weight` is recomputed by its parametrization
                    return [make(code_for("optimizer-non-leaf", pat.code), site,
                                 f"`{owner}` is computed by a parametrization on every access, "
                                 "not a Parameter; the optimizer needs the module's parameters",
                                 fix="pass the module's .parameters() (they hold "
                                     "parametrizations.<name>.original)")]
                made, _ = created_site(t.grad_fn)
                return [make(code_for("optimizer-non-leaf", pat.code), made or site,
                             f"this tensor is not a leaf: it was made by "
                             f"an op ({type(t.grad_fn).__name__}) here ({src(made)})",
                             fix=pat.fix, related=[(site, "the optimizer was built here")])]
    return []


def _group_params(e: ast.expr) -> ast.expr:
    """The ``'params'`` value of a literal group ``{'params': ..., 'lr': ...}``, else ``e``."""
    return next((v for k, v in zip(e.keys, e.values) if isinstance(k, ast.Constant)
                 and k.value == "params"), e) if isinstance(e, ast.Dict) else e


def _group_tensors(groups: list | tuple) -> list:
    """The tensors of parameter groups (``[{'params': t, 'lr': ...}, ...]``): a group's
    ``'params'`` is one tensor or a list of them, as ``add_param_group`` reads it."""
    out: list = []
    for g in groups:
        ps = g.get("params", ()) if isinstance(g, dict) else g
        out.extend([ps] if hasattr(ps, "is_leaf") else
                   ps if isinstance(ps, (list, tuple)) else ())
    return out


def _parametrized_owner(expr: ast.AST | None, frame: types.FrameType) -> str | None:
    """``layer.weight`` when ``layer`` is a module with a parametrization on ``weight``."""
    from torch.nn.utils import parametrize

    if not isinstance(expr, ast.Attribute):
        return None
    ok, mod = _eval_chain(expr.value, frame)
    return ast.unparse(expr) if ok and parametrize.is_parametrized(mod, expr.attr) else None


def _optimizer_empty(pat: ErrorPattern, exc: BaseException, frame: types.FrameType,
                     site: Site, state: Any) -> list[Finding]:
    """An empty parameter list: a consumed generator, or every parameter frozen before."""
    found = _optimizer_args(pat, exc, frame, site, state)
    frozen = state.frozen_sites() if state is not None and not found else []
    if frozen:
        return [make(code_for("all-parameters-frozen", pat.code), frozen[0],
                     f"every parameter was frozen here ({src(frozen[0])}) before the optimizer "
                     "was built from the trainable ones, so its list is empty",
                     fix="unfreeze what should train (or leave out the requires_grad filter)",
                     related=[(s, "also frozen here") for s in frozen[1:4]]
                     + [(site, "the optimizer was built here")])]
    return found or _parameterless_module(pat, frame, site, state)


def _parameterless_module(pat: ErrorPattern, frame: types.FrameType, site: Site,
                          state: Any) -> list[Finding]:
    """``optim(model.parameters())`` of a model that registered nothing: its weights are plain
    tensor attributes, or its forward builds its layers on every call."""
    import torch

    from gradtrace.runtime.trace.hooks import attribute_site

    tree = _stmt(site)
    for recv in _receivers(tree, "parameters"):
        ok, model = _eval_chain(recv, frame)
        if not ok or not isinstance(model, torch.nn.Module) or any(True for _ in
                                                                   model.parameters()):
            continue
        related = [(site, "the optimizer was built here")]
        for m in model.modules():
            tensors = [a for a, v in vars(m).items() if isinstance(v, torch.Tensor)
                       and v.is_floating_point()]
            where = attribute_site(type(m), tensors[0]) if tensors else None
            if where is not None:
                return [make(code_for("learnable-tensor-attribute", pat.code), where,
                             f"`{type(m).__name__}.{tensors[0]}` is a plain tensor attribute, "
                             "not an nn.Parameter: the model registers no parameters, so the "
                             "optimizer gets an empty list", related=related,
                             fix="wrap the weights in nn.Parameter(...) (or keep the layers as "
                                 "submodules)")]
        built = _layers_built_in_forward(model, state)
        if built is not None:
            return [make(pat.code, built, "a layer is created here inside forward() on every "
                         "call: it is never registered on the model, so the model has no "
                         "parameters and the optimizer gets an empty list", related=related,
                         fix="create the layers once in __init__ (self.fc = nn.Linear(...)) "
                             "and call them in forward()")]
    return []


def _layers_built_in_forward(model: Any, state: Any) -> Site | None:
    """The first line inside ``type(model).forward`` where a module was first called that is
    not one of the model's submodules (a layer built by the forward itself)."""
    import inspect

    data = getattr(state, "hooks_data", None)
    try:
        lines, start = inspect.getsourcelines(type(model).forward)
        path = inspect.getsourcefile(type(model).forward) or ""
    except (OSError, TypeError):
        return None
    own = {id(m) for m in model.modules()}
    hits = [r.site for r in list(getattr(data, "modules", {}).values())
            if r.site is not None and r.site.path == path
            and start <= r.site.line < start + len(lines) and id(r.ref()) not in own]
    if hits:
        return min(hits, key=lambda s: s.line)
    line = _module_constructed(lines, type(model).forward.__globals__)  # forward not run yet
    return Site(path, start + line - 1, "forward") if line else None


def _module_constructed(lines: list[str], scope: dict[str, Any]) -> int | None:
    """1-based line (within ``lines``) of the first call that constructs an nn.Module class,
    the class resolved by name in the function's globals (no code is run)."""
    import textwrap

    import torch

    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset)):
        chain, ok = node.func, True
        names: list[str] = []
        while isinstance(chain, ast.Attribute):
            names.insert(0, chain.attr)
            chain = chain.value
        if not isinstance(chain, ast.Name) or chain.id not in scope:
            continue
        obj = scope[chain.id]
        for name in names:
            obj = getattr(obj, name, None)
            ok = obj is not None
        if ok and isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            return node.lineno
    return None



def _legacy_function(pat: ErrorPattern, exc: BaseException, frame: types.FrameType, site: Site,
                     state: Any) -> list[Finding]:
    """``Fn()(x)`` of a Function whose ``forward`` is a plain method: name that ``def``."""
    import torch

    tree = _stmt(site)
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)) if tree else ():
        ok, fn = _eval_chain(call.func, frame)
        cls = fn if isinstance(fn, type) else type(fn)
        forward = vars(cls).get("forward") if ok and issubclass(cls, torch.autograd.Function) \
            else None
        code = getattr(forward, "__code__", None)
        if code is not None:
            return [make(pat.finding_code, Site(code.co_filename, code.co_firstlineno, "forward"),
                         f"`{cls.__name__}.forward` is a plain method (legacy autograd.Function "
                         f"style), so calling an instance of it ({src(site)}) raises",
                         fix=pat.fix, related=[(site, "the Function is applied here")])]
    return []


_POSTHOC_ONLY = frozenset({"grad-none-attr"}) | TRACEBACK_ONLY  # no generic finding without a .grad receiver
_POSTHOC = {
    "grad-none-zero": _grad_none,
    "grad-none-attr": _grad_none,
    "number-backward": _number_backward,
    "none-assigned": _none_assigned,
    "optimizer-empty": _optimizer_empty,
    "optimizer-non-leaf": _optimizer_args,
    "legacy-function": _legacy_function,
}
from gradtrace.runtime.trace.diagnose_args import gradient_shape_after  # noqa: E402
from gradtrace.runtime.trace.posthoc_state import state_mismatch  # noqa: E402
from gradtrace.runtime.trace.diagnose_crash import POSTHOC  # noqa: E402

_POSTHOC.update({"grad-shape": gradient_shape_after, "optimizer-state-groups": state_mismatch})
_POSTHOC.update(POSTHOC)
from gradtrace.runtime.trace.diagnose_kept import POSTHOC as _KEPT  # noqa: E402

_POSTHOC.update(_KEPT)
from gradtrace.runtime.trace.grad_of_grad import POSTHOC as _GRAD_OF_GRAD  # noqa: E402

_POSTHOC.update(_GRAD_OF_GRAD)
from gradtrace.runtime.trace.left_behind import left_behind  # noqa: E402 NOTE [tensor attribute left behind]

_POSTHOC["attribute-left-behind"] = left_behind
from gradtrace.runtime.trace.ddp_guard import POSTHOC as _DDP_GUARD  # noqa: E402

_POSTHOC.update(_DDP_GUARD)
from gradtrace.runtime.trace.inference_after import POSTHOC as _INFERENCE  # noqa: E402 NOTE [inference block from the frames]

_POSTHOC.update(_INFERENCE)
