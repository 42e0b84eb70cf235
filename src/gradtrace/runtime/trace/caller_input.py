"""An in-place activation inside a layer that rewrites a tensor its caller still uses.

# NOTE [in-place on the caller's input]
``self.conv = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(...))`` and ``out = self.conv(x);
out += x`` (vq-vae-2#60): the leading in-place ReLU rewrites ``x`` itself, so the skip
connection carries ``relu(x)``; nothing fails when no op saved ``x`` for backward. On an
``inplace=True`` activation (``F.relu(x, inplace=True)`` from a layer), the first user frame
above the write is read: a local variable of that frame bound to the very tensor written, that
its code reads again after the call running now (``LOAD_FAST`` of the name later in the
bytecode) and that the call does not rebind (``x = self.block(x)`` stores the result back
into ``x``: the later reads want the new value), is the caller's input rewritten under it. The
line named is where the in-place layer is built in its owner's ``__init__`` (its position in the
``nn.Sequential(...)`` there, or the ``self.relu = nn.ReLU(inplace=True)`` of a layer the
caller runs by its attribute, as iResNet's block does with ``out = self.relu(x)``), else where
the caller runs it: the ``inplace=True`` written at the constructor is what rewrites the input. Each (code, instruction) pair is
decided once.
"""
from __future__ import annotations

import ast
import dis
import inspect
import sys
import textwrap
from typing import Any

import torch

from gradtrace.runtime.frames import Site, is_internal

_DONE: dict[tuple[int, int], Any] = {}  # (id(code), lasti) -> decided (code kept alive)


def check_caller_input(state: Any, target: Any) -> None:
    """From an in-place activation on ``target``: note it when a caller still uses it."""
    f: Any = sys._getframe(3)
    layer = None
    while f is not None and is_internal(f.f_code):
        me = f.f_locals.get("self") if f.f_code.co_name == "forward" else None
        if layer is None and isinstance(me, torch.nn.Module):
            layer = me
        f = f.f_back
    if f is None or layer is None:
        return
    key = (id(f.f_code), f.f_lasti)
    if key in _DONE or len(_DONE) > 4096:
        return
    _DONE[key] = f.f_code
    names = [k for k, v in f.f_locals.items() if v is target and k != "self"]
    if not names or not _read_later(f.f_code, f.f_lasti, names):
        return
    owner = f.f_locals.get("self")
    site = _built_at(owner, layer) if isinstance(owner, torch.nn.Module) else None
    call = Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
    state.note("inplace-on-caller-input", site or call, type(layer).__name__, "",
               ((call, f"`{names[0]}` is passed in here and read again after the call"),))


_ENDS = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def _read_later(code: Any, lasti: int, names: list[str]) -> bool:
    """Whether the code after the call at ``lasti`` reads one of ``names`` before rebinding it,
    on a path it can take forward from the call: ``return self.act(x) if self.act else x``
    never reads the ``else`` branch's ``x`` after the call (mmdetection's ConvModule)."""
    ins = list(dis.get_instructions(code))
    at = {i.offset: k for k, i in enumerate(ins)}
    start = next((k for k, i in enumerate(ins) if i.offset > lasti), None)
    if start is None:
        return False
    first = ins[start]
    if first.opname in ("STORE_FAST", "STORE_NAME") and first.argval in names:
        return False  # x = self.block(x): the result is stored back
    todo, seen = [start], set()
    while todo:
        k = todo.pop()
        while k is not None and k < len(ins) and k not in seen:
            seen.add(k)
            i = ins[k]
            if i.opname in ("STORE_FAST", "STORE_NAME", "DELETE_FAST") and i.argval in names:
                break
            if i.opname in ("LOAD_FAST", "LOAD_NAME") and i.argval in names:
                return True
            if i.opcode in _JUMPS and isinstance(i.argval, int) and i.argval > i.offset:
                todo.append(at.get(i.argval, len(ins)))
            if i.opname in _ENDS or "JUMP" in i.opname and "IF" not in i.opname \
                    and "FOR_ITER" not in i.opname and i.opcode in _JUMPS:
                break  # an unconditional jump (its forward target is queued) or the end
            k += 1
    return False


def _built_at(owner: torch.nn.Module, layer: torch.nn.Module) -> Site | None:
    """The line of ``layer``'s constructor call in ``type(owner).__init__`` (as an argument of
    the ``nn.Sequential(...)`` assigned to ``self.<attr>``), best effort."""
    path = next((n for n, m in owner.named_modules() if m is layer), None)
    if not path:
        return None
    attr, _, rest = path.partition(".")
    if rest and not rest.isdigit():
        return None
    try:
        lines, start = inspect.getsourcelines(type(owner).__init__)
        file = inspect.getsourcefile(type(owner).__init__) or ""
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets):
            args = node.value.args
            if not rest:  # self.<attr> = nn.ReLU(inplace=True)
                return Site(file, start + node.lineno - 1, "__init__")
            idx = int(rest)
            if idx < len(args) and not any(isinstance(a, ast.Starred) for a in args[:idx + 1]):
                return Site(file, start + args[idx].lineno - 1, "__init__")
    return None
