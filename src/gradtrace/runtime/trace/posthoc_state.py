"""``optimizer.load_state_dict(checkpoint)`` refused because the optimizer's parameter groups do
not match the checkpoint's (a group added with ``add_param_group`` after the load, a model
extended or shrunk since the save). Attributed from the traceback: the line, in the function
that built the optimizer, where the load happens (whether it is called there or through a
helper such as ``load_model(model, ckpt, optimizer)``), since the order of build, added groups
and load is decided there."""
from __future__ import annotations

import ast
import types
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site, is_internal


def _user_frames(exc: BaseException) -> list[tuple[types.FrameType, Site]]:
    out = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not is_internal(code):
            out.append((tb.tb_frame, Site(code.co_filename, tb.tb_lineno, code.co_name)))
        tb = tb.tb_next
    return out


def _loaded_optimizer(frame: types.FrameType, site: Site) -> Any:
    """The optimizer whose ``load_state_dict`` is called at ``site`` (``opt`` or ``self.opt``),
    read from the frame's locals and instance dicts."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    for n in ast.walk(tree) if tree is not None else ():
        if not (isinstance(n, ast.Attribute) and n.attr == "load_state_dict"
                and n.lineno == site.line):
            continue
        recv, value = n.value, None
        if isinstance(recv, ast.Name):
            value = frame.f_locals.get(recv.id, frame.f_globals.get(recv.id))
        elif isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name):
            base = frame.f_locals.get(recv.value.id, frame.f_globals.get(recv.value.id))
            value = getattr(base, "__dict__", {}).get(recv.attr)
        if hasattr(value, "param_groups"):
            return value
    return None


def _built_here(frame: types.FrameType, site: Site, opt: Any) -> str | None:
    """A local of ``frame`` bound to ``opt`` that its function assigned from a call before
    ``site`` (the optimizer was built in this function)."""
    from gradtrace.runtime.trace.diagnose_args import _scope, assignment_before
    from gradtrace.runtime.trace.locate import tree_of

    for name, value in list(frame.f_locals.items()):
        if value is opt:
            node = assignment_before(site, name)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                return name
            continue
        attrs = [k for k, v in list(getattr(value, "__dict__", {}).items()) if v is opt]
        tree = tree_of(site.path) if attrs else None
        for n in ast.walk(_scope(tree, site.line)) if tree is not None else ():
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and \
                    n.lineno < site.line and any(
                    isinstance(t, ast.Attribute) and t.attr in attrs and
                    isinstance(t.value, ast.Name) and t.value.id == name for t in n.targets):
                return f"{name}.{attrs[0]}"
    return None


def state_mismatch(pat: ErrorPattern, exc: BaseException, frame: types.FrameType, site: Site,
                   state: Any) -> list[Finding]:
    opt = _loaded_optimizer(frame, site)
    if opt is None:
        return []
    frames = _user_frames(exc)
    for f, where in reversed(frames):
        name = _built_here(f, where, opt)
        if name is None:
            continue
        groups = len(opt.param_groups)
        related = [] if where == site else [(site, "load_state_dict() raises here")]
        return [make(code_for("optimizer-state-mismatch", pat.code), where,
                     f"the state of `{name}` is loaded here ({src(where)}) while its "
                     f"{groups} parameter group(s) do not match the checkpoint's: groups added "
                     "later (add_param_group), or parameters added or removed since the "
                     "checkpoint was saved, must be in place before the load",
                     fix="load the optimizer's state after every parameter group is added "
                         "(and with the model the checkpoint was saved from)",
                     related=related)]
    return []
