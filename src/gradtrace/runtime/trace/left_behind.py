"""A tensor kept on a module as a plain attribute is left behind by ``.to()``/``.half()``.

# NOTE [tensor attribute left behind]
``Module.to()``, ``.half()``, ``.double()``, ``.cuda()`` and ``.cpu()`` convert the module's
parameters and buffers, nothing else. A tensor stored on the module as a plain attribute
(``self.ab = self.attention_biases[:, idx]`` cached for inference by MobileSAM's TinyViT,
``self.pe = torch.zeros(...)`` for a positional encoding, a mask built in ``__init__``) keeps
its dtype and device. The forward that reads it then mixes it with the converted values and
torch refuses: ``expected m1 and m2 to have the same dtype``, ``Input type (c10::Half) and bias
type (float) should be the same``, ``Expected all tensors to be on the same device``. The
traceback points at the op that met the two, not at the attribute.

Run-time facts, read after the crash from the traceback alone (no hook, no per-op work): the
message is a dtype (or device) mismatch; a frame of the traceback runs a method of a module
(``self``) whose code reads an attribute (``self.<name>``, by the frame's code names) that is a
plain tensor in the module's ``__dict__`` (not a parameter, not a buffer), floating point, while
every floating parameter and buffer of that module (itself and its children) has one other dtype
(or lives on one other device). That module was converted and the attribute was not. Named: the
``self.<name> = ...`` assignment in the module's class (or a base class of the program), the
first one that does not store None; the crash's line is attached. A buffer
(``register_buffer(..., persistent=False)``) is converted with the parameters: no mismatch, no
finding; an attribute of the same dtype as the parameters is never named. GT863.
"""
from __future__ import annotations

import ast
import inspect
import re
import types
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime import frames
from gradtrace.runtime.frames import Site, is_internal

_DEVICE = re.compile(r"device", re.I)
_PARAMS = 4096  # parameters and buffers compared per module


def _reference(module: Any, device: bool) -> Any:
    """The one dtype (or device) of the module's floating parameters and buffers, else None."""
    seen: set[Any] = set()
    for i, t in enumerate([*module.parameters(), *module.buffers()]):
        if i >= _PARAMS:
            break
        if t.is_floating_point():
            seen.add(t.device if device else t.dtype)
    return next(iter(seen)) if len(seen) == 1 else None


def _class_node(k: type) -> tuple[str, ast.ClassDef] | None:
    """The file and ``class`` statement of ``k``, found through its methods' code (a class of
    a script run by ``runpy`` has no module ``inspect`` could read)."""
    from gradtrace.runtime.trace.locate import tree_of

    for v in vars(k).values():
        code = getattr(inspect.unwrap(v), "__code__", None) if callable(v) else None
        if code is None or code.co_filename.startswith(frames.INTERNAL_PREFIXES):
            continue
        tree = tree_of(code.co_filename)
        for n in ast.walk(tree) if tree is not None else ():
            if isinstance(n, ast.ClassDef) and n.name == k.__name__ \
                    and n.lineno <= code.co_firstlineno <= (n.end_lineno or n.lineno):
                return code.co_filename, n
    return None


def _assigned_at(cls: type, attr: str) -> Site | None:
    """The first ``self.<attr> = <not None>`` in ``cls`` or a base class of the program."""
    for k in cls.__mro__:
        hit = _class_node(k)
        if hit is None:
            continue
        path, node = hit
        lines = sorted(n.lineno for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign))
                       and not (isinstance(n.value, ast.Constant) and n.value.value is None)
                       and any(isinstance(t, ast.Attribute) and t.attr == attr
                               and isinstance(t.value, ast.Name) and t.value.id == "self"
                               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])))
        if lines:
            return Site(path, lines[0], k.__name__)
    return None


def _left_behind(exc: BaseException, device: bool) -> tuple[Any, str, Any, Any] | None:
    """(module, attribute, its dtype/device, the module's) for the innermost frame that reads
    a plain tensor attribute its converted module left behind."""
    import torch

    tb, found = exc.__traceback__, None
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self") if frame.f_code.co_argcount else None
        if isinstance(owner, torch.nn.Module) and not is_internal(frame.f_code):
            names = set(frame.f_code.co_names)
            for attr, v in list(vars(owner).items()):
                if attr not in names or not isinstance(v, torch.Tensor) \
                        or not v.is_floating_point():
                    continue
                ref = _reference(owner, device)
                mine = v.device if device else v.dtype
                if ref is not None and ref != mine:
                    found = (owner, attr, mine, ref)
                    break
        tb = tb.tb_next
    return found


def left_behind(pat: Any, exc: BaseException, frame: types.FrameType, site: Site,
                state: Any) -> list[Finding]:
    """GT863 (``pat.diagnosis``) at the assignment of a plain tensor attribute ``.to()`` left
    behind (the NOTE)."""
    from gradtrace.runtime.build import make, src

    device = bool(_DEVICE.search(str(exc).split("\n", 1)[0]))
    hit = _left_behind(exc, device)
    if hit is None:
        return []
    owner, attr, mine, ref = hit
    at = _assigned_at(type(owner), attr)
    if at is None:
        return []
    name = type(owner).__name__
    what = "device" if device else "dtype"
    return [make(pat.diagnosis, at,
                 f"`{name}.{attr}` is a plain tensor attribute, not a buffer: it is still "
                 f"{mine} while the parameters of the {name} were converted to {ref} "
                 f"(`.to()`/`.half()`/`.cuda()` convert parameters and buffers only), and the "
                 f"{what} mismatch raised at {src(site)}",
                 fix=f"register it with self.register_buffer('{attr}', ..., persistent=False) "
                     "so that it is converted with the module (or rebuild it from the "
                     "parameters in forward)",
                 related=[(site, f"the {what}s met here")])]


__all__ = ["left_behind"]
