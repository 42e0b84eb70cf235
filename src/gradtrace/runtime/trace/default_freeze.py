"""A parameter made frozen inside a library call by a flag the caller left at its default.

# NOTE [frozen by a library call's default]
``nn.Embedding.from_pretrained(weights)`` returns an embedding whose weight does not require
grad: its ``freeze`` flag defaults to True and the library makes the weight with
``Parameter(weights, requires_grad=False)``. A model that builds its pretrained embedding this
way and hands ``model.parameters()`` to its optimizer trains everything else; that weight never
gets a gradient and never moves. Nothing fails.

Run-time facts (set-up only, nothing per op): the global parameter-registration hook already
sees every Parameter registered with ``requires_grad=False`` (NOTE [registered frozen]). When
the registering code is not the user's (torch's or an installed package's), the outermost
library frame is the function the user's line called. When that call (parsed from its line:
keywords by name, positionals by position, no ``*``/``**`` unpacking) sets none of the
function's boolean parameters, every flag is at its default: the freeze came from a default. A
call that sets one (``freeze=True``) made the caller's own choice; a Parameter the user's own
code makes frozen registers through ``Module.__setattr__``, which has no flags. Reported at the
end when the parameter is still frozen, was never set back to ``requires_grad=True``, and an
optimizer that holds it stepped with gradients on its other parameters: handed to the
optimizer, it was meant to train. Not reported either when a ``requires_grad`` write froze it
(that write is the choice), when it was registered frozen before (a parametrization moving a
frozen weight), or when it is not floating point (a quantized weight cannot train). Silent: a
flag passed explicitly, the optimizer built from the trainable parameters only (the freeze is
known), the parameter thawed later, a run that never steps.
"""
from __future__ import annotations

import ast
import sys
import weakref
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime import frames
from gradtrace.runtime.frames import is_internal

CODE = "GT867"
_MAX = 64

_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_born_frozen(state: Any, born: dict[int, Any], t: Any, site: Any) -> None:
    """The Parameter ``t``, made with ``requires_grad=False``, registered on a module from the
    user's line ``site``: kept in ``born`` (NOTE [registered frozen]), and in this module's
    book when a library call's default made it so (see the NOTE)."""
    old = born.get(id(t))
    again = old is not None and old[0]() is t  # registered frozen before (a parametrization)
    born[id(t)] = (weakref.ref(t), site)
    if again:
        return
    try:
        f = sys._getframe(1)
    except ValueError:
        return
    own = frames.INTERNAL_PREFIXES[0]
    while f is not None and f.f_code.co_filename.startswith(own):
        f = f.f_back
    lib = None
    while f is not None and is_internal(f.f_code):
        lib, f = f, f.f_back
    if lib is None or f is None or site is None:
        return
    left = _defaults_left(lib, f)
    if left:
        book = _BY_STATE.get(state)
        if book is None:
            book = _BY_STATE[state] = {}
        if len(book) < _MAX or id(t) in book:
            book[id(t)] = (weakref.ref(t), site, lib.f_code.co_name, left)


def _defaults_left(lib: Any, user: Any) -> list[str]:
    """The boolean parameters of ``lib``'s function when the call on ``user``'s line sets none
    of them (all at their defaults), else []."""
    code = lib.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    flags = [n for n in names if type(lib.f_locals.get(n)) is bool]
    if not flags:
        return []
    call = _call_on_line(user, code.co_name)
    if call is None or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return []
    first = lib.f_locals.get(names[0]) if names else None
    bound = isinstance(call.func, ast.Attribute) and first is not None \
        and getattr(first, code.co_name, None) is not None  # self / cls given by the call
    given = set(names[int(bound):int(bound) + len(call.args)]) | {k.arg for k in call.keywords}
    return [] if given & set(flags) else flags  # one flag set: the caller chose them


def _call_on_line(frame: Any, name: str) -> ast.Call | None:
    """The one call of a function called ``name`` on the statement ``frame`` is running."""
    import linecache

    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    try:
        tree = ast.parse(line)
    except SyntaxError:
        try:
            tree = ast.parse(line.rstrip(":") + ": pass")
        except SyntaxError:
            return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
             (n.func.attr if isinstance(n.func, ast.Attribute) else
              n.func.id if isinstance(n.func, ast.Name) else None) == name]
    return calls[0] if len(calls) == 1 else None


def default_freeze_findings(state: Any, data: Any, param_name: Any) -> list[Finding]:
    """GT867 at each call whose default froze a parameter an optimizer then held in vain."""
    book = _BY_STATE.pop(state, None)
    if not book:
        return []
    held: dict[int, Any] = {}
    for rec in list(data.optimizers.values()):
        opt = rec.ref()
        if opt is not None and rec.steps and rec.last_graded:
            for g in opt.param_groups:
                for p in g["params"]:
                    held.setdefault(id(p), rec)
    from gradtrace.runtime.build import make, src

    out: list[Finding] = []
    done: set[Any] = set()
    for key, (ref, site, func, left) in book.items():
        p = ref()
        rec = held.get(key)
        if p is None or rec is None or p.requires_grad or not p.is_floating_point() \
                or site in done \
                or state.unfrozen_at([p]) is not None or state.frozen_at(p) is not None:
            continue
        done.add(site)
        flags = ", ".join(f"`{n}`" for n in left)
        out.append(make(
            CODE, site,
            f"`{func}` called here made {param_name(data, p)} with `requires_grad=False`, "
            f"by a default: the call sets none of its flags ({flags}); the optimizer that "
            f"steps at {src(rec.site)} holds it and stepped {rec.steps} times, updating the "
            f"other parameters, but this one never gets a gradient and keeps its initial values",
            fix=f"pass the flag of `{func}` that keeps it trainable (one of {flags}: "
                f"`freeze=False` for `from_pretrained`), or leave it out of the optimizer if "
                f"it should stay fixed",
            related=[(rec.site, "the optimizer holding the frozen parameter steps here")],
            severity="warning"))
    return out


__all__ = ["CODE", "default_freeze_findings", "note_born_frozen"]
