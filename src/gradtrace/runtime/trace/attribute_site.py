"""Where a module class assigns one of its attributes (``self.<attr> = ...`` in ``__init__``,
its own or a base class's): the line a finding about that attribute is named on."""
from __future__ import annotations

from gradtrace.runtime.frames import Site


def attribute_site(cls: type, attr: str) -> Site | None:
    """The line of ``self.<attr> = ...`` in ``cls.__init__``, else in the ``__init__`` of a
    base class that assigns it (best effort)."""
    import inspect
    import re

    pat = re.compile(rf"self\.{re.escape(attr)}\s*(:[^=]*)?=[^=]")
    inits = [k.__dict__["__init__"] for k in cls.__mro__ if "__init__" in k.__dict__]
    for init in dict.fromkeys(inits):
        try:
            lines, start = inspect.getsourcelines(init)
            path = inspect.getsourcefile(init) or ""
        except (OSError, TypeError):
            continue
        hit = next((start + i for i, line in enumerate(lines) if pat.search(line)), None)
        if hit is not None:
            return Site(path, hit, "__init__")
    return None
