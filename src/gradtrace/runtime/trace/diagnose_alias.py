"""Where an in-place error's tensor got its second name: the alias or view the fix belongs to.

A tensor saved for backward and then changed in place is reported on the write (see
:mod:`gradtrace.runtime.trace.diagnose_inplace`), except when the write only reached the saved
tensor through another name made for it:

- ``out = x`` (no copy) then ``out[...] = ...`` in the same function: the alias line, where
  ``x.clone()`` belongs (a write of the whole tensor, ``acc += v``, stays on the write:
  NOTE [whole-tensor write through an alias]);
- the saved tensor is a *view* (``x[:, 0].reshape(...)``, ``.t()``, a slice) of a tensor later
  written in place: the line that made the view (its saving op's input, a view node);
- the write itself was not seen (it happened inside a library call, such as
  ``nn.Embedding(max_norm=...)`` renormalising its weight on lookup): the op that saved the
  tensor, the last user line that read it before the change.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site, node_name
from gradtrace.runtime.trace.written_back import written_back

VIEW_NODES = frozenset({"View", "ReshapeAlias", "UnsafeView", "Select", "Slice", "AsStrided",
                        "Transpose", "Permute", "Expand", "Unsqueeze", "Squeeze", "T",
                        "Diagonal", "Unfold", "Split", "SplitWithSizes", "Unbind", "Alias",
                        "Narrow", "Unflatten", "ViewAs", "Chunk", "ViewAsComplex", "ViewAsReal"})
_VIEW_METHODS = frozenset({"view", "view_as", "reshape", "t", "transpose", "permute", "expand",
                           "expand_as", "unsqueeze", "squeeze", "narrow", "select", "unflatten",
                           "flatten", "diagonal", "unfold", "T", "mT", "detach"})


def _root_name(e: ast.AST) -> str | None:
    """``out`` of ``out``, ``out[...]``, ``out[...][...]``."""
    while isinstance(e, ast.Subscript):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _written_name(stmt: ast.stmt) -> str | None:
    """The local name whose tensor the statement writes in place: ``out[...] = v``,
    ``out += v``, ``out.add_(v)``, ``out[..].zero_()``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Subscript):
        return _root_name(stmt.targets[0])
    if isinstance(stmt, ast.AugAssign):
        return _root_name(stmt.target)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Attribute) and f.attr.endswith("_") and not f.attr.startswith("_"):
            return _root_name(f.value)
    return None


def _made_inside(tree: ast.AST, where: Site, made: Site | None) -> bool:
    """Was the written tensor created inside the function that holds the write?"""
    if made is None or made.path != where.path:
        return False
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
           and n.lineno <= where.line <= (n.end_lineno or n.lineno)]
    fn = max(fns, key=lambda n: n.lineno, default=None)
    return fn is not None and fn.lineno <= made.line <= (fn.end_lineno or fn.lineno)


def _partial(stmt: ast.stmt) -> bool:
    """# NOTE [whole-tensor write through an alias]
    The write changes part of the tensor (``out[...] = v``, ``out[...] += v``,
    ``out[...].zero_()``): the rest keeps the aliased tensor's values, so the copy belongs at
    the alias. So does a write into a tensor the function was given (created by a caller:
    ``acc = feats; acc += ...`` changes the caller's tensor). A write of the whole tensor made
    in the same function (``acc += v``, ``acc.add_(v)``: an accumulator started from one of
    its own values) has an out-of-place form on its own line (``acc = acc + v``): that write
    is the line named; so does one started from a tensor a callee returned to the function
    (``c2, c3 = fpem(c2, c3)`` then ``c2_ffm = c2``, ``c2_ffm += c2``: MMOCR's FPEM_FFM)."""
    if isinstance(stmt, ast.Assign):
        return True
    if isinstance(stmt, ast.AugAssign):
        return isinstance(stmt.target, ast.Subscript)
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
        isinstance(call.func.value, ast.Subscript)


def _aliased(value: ast.AST) -> str | None:
    """The name an assigned value shares memory with: ``x``, ``x[...]``, ``x.view(...)``,
    ``x.t()`` (chains of those); None for anything that makes a new tensor."""
    e = value
    while True:
        if isinstance(e, ast.Name):
            return e.id
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Attribute) and e.attr in ("T", "mT"):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in _VIEW_METHODS:
            e = e.func.value
        else:
            return None


def alias_site(where: Site, made: Site | None = None) -> tuple[Site, str, str] | None:
    """For an in-place write at ``where`` into a local that was bound, in the same function, to
    another name's tensor without a copy: (the binding's line, the local, the other name).
    A write of the whole tensor made in that same function (``made``) is not an alias's fault
    (NOTE [whole-tensor write through an alias])."""
    from gradtrace.runtime.trace.diagnose_args import assignment_before
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(where.path)
    if tree is None:
        return None
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == where.line]
    written = next((s for s in stmts if _written_name(s)), None)
    if written is None or not _partial(written) and _made_inside(tree, where, made):
        return None  # NOTE [whole-tensor write through an alias]
    name = _written_name(written)
    bound = assignment_before(where, name)
    if not isinstance(bound, ast.Assign) or len(bound.targets) != 1 or \
            not isinstance(bound.targets[0], ast.Name):
        return None
    other = _aliased(bound.value)
    if other is None or other == name:
        return None
    if not _partial(written) and _call_result(where, bound, other):
        return None  # NOTE [whole-tensor write through an alias]: a callee made it for us
    return Site(where.path, bound.lineno, where.function), name, other


def _call_result(where: Site, bound: ast.stmt, other: str) -> bool:
    """The last binding of ``other`` before the alias, in the function holding the write,
    takes a call's result (``c2, c3 = block(c2, c3)``, ``x = blk(x)``): the tensor is the
    function's own, made for it by a callee, as one made in the function itself is (a name
    never bound there is what a caller gave it)."""
    from gradtrace.runtime.trace.diagnose_args import assignment_before

    b = assignment_before(Site(where.path, bound.lineno, where.function), other)
    return isinstance(b, ast.Assign) and isinstance(b.value, ast.Call) \
        and not isinstance(b.value.func, ast.Attribute) or isinstance(b, ast.Assign) \
        and isinstance(b.value, ast.Call) and isinstance(b.value.func, ast.Attribute) \
        and b.value.func.attr not in _VIEW_METHODS


def _changed_leaf(node: Any, shape: tuple[int, ...] | None = None) -> bool | None:
    """For an AccumulateGrad node: whether its leaf was changed in place (and has ``shape``);
    None for other nodes."""
    leaf = getattr(node, "variable", None)
    if leaf is None:
        return None
    return leaf._version > 0 and (shape is None or tuple(leaf.shape) == shape)


def _view_input(node: Any, shape: tuple[int, ...]) -> tuple[Any, Any] | None:
    """(the view node among ``node``'s inputs, the first non-view node below it); None when
    the saved tensor is a leaf input changed in place (a parameter), not a view."""
    try:
        inputs = [n for n, _ in node.next_functions if n is not None]
    except (AttributeError, RuntimeError):
        return None
    if any(_changed_leaf(n, shape) for n in inputs):
        return None
    for n in inputs:
        if node_name(n) not in VIEW_NODES or created_site(n)[0] is None:
            continue
        base = n
        for _ in range(64):
            try:
                below = [m for m, _ in base.next_functions if m is not None]
            except (AttributeError, RuntimeError):
                break
            if not below or node_name(base) not in VIEW_NODES:
                break
            base = below[0]
        if _changed_leaf(base) is False:  # a view of a leaf nothing changed (w.t())
            continue
        return n, base
    return None


def _whole_write(where: Site) -> bool:
    """# NOTE [whole write of a viewed tensor]
    A saved view's base written in place as a whole (``x += conv(x.transpose(1, 2))``,
    ``x.mul_(s)``: a write with an out-of-place form on its own line, ``x = x + ...``) is
    named at the write; a write of part of the base (``x[:, 0] = v``, the view's region
    written back) keeps the view's line, where the copy belongs."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(where.path)
    if tree is None:
        return False
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == where.line]
    written = next((s for s in stmts if _written_name(s)), None)
    return written is not None and not _partial(written)


def saved_view_or_saver(node: Any, saver: Site | None, shape: tuple[int, ...], state: Any,
                        pat: Any, site: Site | None) -> list[Finding]:
    """No seen write has the saved tensor's shape: a view the saving op took of a tensor
    written later, else the saving op itself (see the module doc)."""
    if node is None or saver is None:
        return []
    kind = code_for("inplace-on-saved-tensor", pat.code)
    op = node_name(node)
    hit = _view_input(node, shape)
    if hit is not None:
        # the statement that sliced and wrote back: NOTE [slice written back on its own line]
        back = written_back(hit[0], state.inplace, VIEW_NODES)
        if back is not None:
            return [make(kind, back[0],
                         f"`{back[1]}` here writes back into the tensor that this same line "
                         f"sliced and handed on: a view of that slice (shape {list(shape)}) "
                         f"was saved for backward by `{op}` ({src(saver)}) and shares its "
                         "memory, so the write changed it and backward() found it changed",
                         fix="build the new tensor out of place (torch.cat of the untouched "
                             "part and the result) instead of writing the result back",
                         related=[(saver, f"`{op}` saved the view for backward here"),
                                  (site, "backward() failed here")])]
        view_at = created_site(hit[0])[0]
        base_at = created_site(hit[1])[0]
        write = next((r for r in reversed(state.inplace) if base_at is not None
                      and r[5] == base_at), None)
        related = [(saver, f"`{op}` saved the view for backward here")]
        wrote = "was then written in place"
        if write is not None and _whole_write(write[0]):  # NOTE [whole write of a viewed tensor]
            return [make(kind, write[0],
                         f"`{write[1]}` here rewrites the whole tensor in place, and a view of "
                         f"it (shape {list(shape)}, made at {src(view_at)}) was saved for "
                         f"backward by `{op}` ({src(saver)}): the view shares its memory, so "
                         "backward() found it changed",
                         fix="write it out of place (x = x + y instead of x += y)",
                         related=[(view_at, "the view was made here"),
                                  (saver, f"`{op}` saved the view for backward here"),
                                  (site, "backward() failed here")])]
        if write is not None:
            related.append((write[0], f"`{write[1]}` wrote into the tensor it views here"))
            wrote = f"was then written in place by `{write[1]}` at {src(write[0])}"
        return [make(kind, view_at,
                     f"this line makes a view (shape {list(shape)}, it shares memory with the "
                     f"tensor it was taken from) that `{op}` saved for backward; the tensor "
                     f"it views {wrote}, which changed the saved view too",
                     fix="take a copy of the view here (.clone()), or build the new values "
                         "out of place (torch.cat/torch.stack) instead of writing them back",
                     related=[*related, (site, "backward() failed here")])]
    return [make(kind, saver,
                 f"`{op}` here saved a tensor (shape {list(shape)}) for backward that was "
                 "changed in place afterwards by a call gradtrace did not see (inside a "
                 "library call, e.g. nn.Embedding(max_norm=...) renormalising its weight on "
                 "lookup)",
                 fix="compute this after the call that changes the tensor, or use a copy "
                     "(.clone()) of the tensor here",
                 related=[(site, "backward() failed here")])]
