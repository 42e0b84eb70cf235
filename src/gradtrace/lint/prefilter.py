"""Which files are worth checking at all (NOTE [torch prefilter]).

# NOTE [torch prefilter]
A file whose code never mentions ``torch`` is skipped, with one exception: a training step
written in a file of its own, which calls ``.backward(`` on what helpers of the project return
and imports nothing of torch itself (``engine.py``: ``from losses import dice_loss`` ...
``loss.backward()``). Such a file is checked when a module it imports by a plain
``import x`` / ``from x import ...`` (``x`` a file beside it, or a package folder beside it)
mentions ``torch``: the bugs of its helpers are found from its calls (NOTE [project index]).
One hop, beside the file only; anything unreadable: skipped as before.
The same holds the other way round: a training loop written as a function of its own file,
with nothing of torch in it (``loop.py``: ``def fit(module, loader): ... out["loss"].backward()``),
is checked when a file beside it that mentions ``torch`` imports it (``from loop import fit``
in ``train.py``, which hands it the module): what the loop runs is known from those callers
(NOTE [handed class across files]). At most ``_SIBLINGS`` files of the folder are read.
Neither exception holds for a file that defines a ``backward`` method itself (``def
backward(self, ...)`` in a class of its own, a network written from scratch in NumPy whose
``mlp.backward()`` is that method, imported by its PyTorch twin for comparison): its
``.backward(`` calls are its own, not autograd's.
"""
from __future__ import annotations

import os
import re

_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([A-Za-z_][\w.]*)[ \t]+import|import[ \t]+([A-Za-z_][\w.]*))",
                     re.M)
_OWN_BACKWARD = re.compile(rb"^[ \t]+def[ \t]+backward[ \t]*\(", re.M)
_MAX = 1 << 20
_SIBLINGS = 200


def _mentions_torch(path: str) -> bool:
    try:
        if os.path.getsize(path) > _MAX:
            return False
        with open(path, "rb") as fh:
            return b"torch" in fh.read()
    except OSError:
        return False


def imports_torch_sibling(path: str, data: bytes) -> bool:
    """``data`` (the bytes of ``path``) calls ``.backward(`` and imports a module beside it
    whose text mentions ``torch``."""
    if b".backward(" not in data or _OWN_BACKWARD.search(data):
        return False
    here = os.path.dirname(os.path.abspath(path))
    for m in _IMPORT.finditer(data):
        name = (m.group(1) or m.group(2)).decode("ascii", "replace").split(".")
        base = os.path.join(here, *name)
        for cand in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(cand) and _mentions_torch(cand):
                return True
    return False


def imported_by_torch_sibling(path: str, data: bytes) -> bool:
    """``data`` (the bytes of ``path``) calls ``.backward(`` and a file beside it that
    mentions ``torch`` imports it (``from loop import fit``, ``import loop``, ``from . import
    loop``): NOTE [torch prefilter]."""
    if b".backward(" not in data or _OWN_BACKWARD.search(data):
        return False
    here = os.path.dirname(os.path.abspath(path))
    me = os.path.splitext(os.path.basename(path))[0]
    if not me.isidentifier():
        return False
    name = re.escape(me.encode())
    pat = re.compile(rb"^[ \t]*(?:from[ \t]+[\w.]*?\b" + name + rb"[ \t]+import\b|import[ \t]+"
                     rb"(?:[\w.]*\.)?" + name + rb"\b|from[ \t]+\.+[ \t]+import[^\n]*\b" + name
                     + rb"\b)", re.M)
    try:
        names = sorted(os.listdir(here))
    except OSError:
        return False
    others = [n for n in names if n.endswith(".py") and n != os.path.basename(path)]
    for n in others[:_SIBLINGS]:
        try:
            p = os.path.join(here, n)
            if os.path.getsize(p) > _MAX:
                continue
            with open(p, "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        if b"torch" in text and pat.search(text):
            return True
    return False


def worth_checking(path: str, data: bytes) -> bool:
    """NOTE [torch prefilter], on the raw bytes."""
    return b"torch" in data or imports_torch_sibling(path, data) \
        or imported_by_torch_sibling(path, data)
