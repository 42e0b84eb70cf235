"""``optimizer.load_state_dict(checkpoint)`` refused because the optimizer's parameter groups do
not match the checkpoint's (a group added with ``add_param_group`` after the load, a model
extended or shrunk since the save). Attributed from the traceback: the line, in the function
that built the optimizer, where the load happens (whether it is called there or through a
helper such as ``load_model(model, ckpt, optimizer)``), since the order of build, added groups
and load is decided there.

# NOTE [built for a value the resume rebinds]
pysot's ``optimizer = build_opt_lr(model, cfg.TRAIN.START_EPOCH)`` chooses the trainable layers
from the epoch it is given, then ``model, optimizer, cfg.TRAIN.START_EPOCH = restore_from(...)``
loads a checkpoint saved at a later epoch and rebinds that epoch. The load is in the right
place; the build used a value the resume was about to change, and the fix moves the build after
it. Read from the function that built the optimizer: an argument of the build call (a name or a
dotted attribute) is assigned again after the build, at or before the statement that runs the
load, from a value that does not read it (``model, opt = resume(model, opt)`` hands the same
model back, ``model = model.to(device)`` moves it); then the build line is named. Any other
build keeps the load's line."""
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
        built = _built_for_rebound(where, name)
        if built is not None:  # NOTE [built for a value the resume rebinds]
            build, arg, rebound = built
            return [make(code_for("optimizer-state-mismatch", pat.code), build,
                         f"`{name}` is built here from `{arg}`, which the resume rebinds at "
                         f"line {rebound.line} before the optimizer's state is loaded: its "
                         f"{groups} parameter group(s) were chosen for the value before the "
                         "resume and do not match the checkpoint's",
                         fix=f"build the optimizer after the resume has set `{arg}`",
                         related=[(rebound, f"`{arg}` is rebound here"), *related])]
        return [make(code_for("optimizer-state-mismatch", pat.code), where,
                     f"the state of `{name}` is loaded here ({src(where)}) while its "
                     f"{groups} parameter group(s) do not match the checkpoint's: groups added "
                     "later (add_param_group), or parameters added or removed since the "
                     "checkpoint was saved, must be in place before the load",
                     fix="load the optimizer's state after every parameter group is added "
                         "(and with the model the checkpoint was saved from)",
                     related=related)]
    return []


def _built_for_rebound(where: Site, name: str) -> tuple[Site, str, Site] | None:
    """The build of local ``name``, the argument of it that a statement after the build, up to
    the load's at ``where``, assigns again, and that statement.
    NOTE [built for a value the resume rebinds]"""
    from gradtrace.runtime.trace.diagnose_args import _scope, assignment_before
    from gradtrace.runtime.trace.locate import tree_of

    node = assignment_before(where, name)
    tree = tree_of(where.path)
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call) or tree is None:
        return None
    call = node.value
    args = {ast.unparse(a) for a in [*call.args, *(k.value for k in call.keywords)]
            if isinstance(a, (ast.Name, ast.Attribute))}
    if not args:
        return None
    stack = list(ast.iter_child_nodes(_scope(tree, where.line)))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))
        if not isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or \
                not node.lineno < n.lineno <= where.line:
            continue
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        passed = {ast.unparse(r) for r in ast.walk(n.value)  # read by the value itself
                  if isinstance(r, (ast.Name, ast.Attribute))} if n.value else set()
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Name, ast.Attribute)) and \
                        isinstance(sub.ctx, ast.Store) and ast.unparse(sub) in args - passed:
                    return (Site(where.path, node.lineno, where.function), ast.unparse(sub),
                            Site(where.path, n.lineno, where.function))
    return None
