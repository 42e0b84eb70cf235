"""Small helpers to build runtime :class:`~gradtrace.findings.Finding` values."""
from __future__ import annotations

import linecache
import os

from gradtrace.findings import Finding, Fix, Related
from gradtrace.codes import TABLE
from gradtrace.runtime.catalogue import STATIC_TWINS
from gradtrace.runtime.frames import Site


# NOTE [never graded by design]
# Why a parameter got no gradient when no forward used it toward a loss: its module never ran,
# or ran (grad on, no cut seen) and its output was left out (BERT's pooler unpacked into `_`).
# That is no cut: correct programs do it on purpose. `fuse` shows the second only when a static
# finding on the code accounts for it; both are left out when DDP was built with
# find_unused_parameters=True (declared). The first is still reported on its own (a layer defined
# and optimized, never called: examples/runtime/unused_layer.py).
NEVER_RAN = "its module never ran in a forward pass"
OUTPUT_UNUSED = "it is used in forward, but no backward() reached it"


def display_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    if not path or path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def code_for(kind: str, fallback: str) -> str:
    """The static rule's code for this kind of bug if one exists, else the runtime code."""
    twin = STATIC_TWINS.get(kind)
    return twin[0] if twin else fallback


def make(code: str, site: Site | None, message: str, *, fix: str = "",
         related: list[tuple[Site | None, str]] | None = None,
         severity: str = "error") -> Finding:
    """A runtime finding at ``site`` (``<unknown>`` if the user line is not known)."""
    rel = tuple(Related(display_path(s.path), s.line, m, s.column) for s, m in (related or ())
                if s is not None)
    name = TABLE[code].name if code in TABLE else _static_name(code)
    return Finding(code=code, name=name, message=message,
                   path=display_path(site.path) if site else "<unknown>",
                   line=site.line if site else 1, column=_column(site),
                   severity=severity,  # type: ignore[arg-type]
                   related=rel, fix=Fix(fix, "unsafe") if fix else None, source="runtime")


def _column(site: Site | None) -> int:
    """The call's column, else where the statement starts (not column 1 of an indented line)."""
    if site is None:
        return 0
    if site.column:
        return site.column
    text = linecache.getline(site.path, site.line)
    return len(text) - len(text.lstrip()) if text and text.strip() else 0


def _static_name(code: str) -> str:
    for twin_code, name in STATIC_TWINS.values():
        if twin_code == code:
            return name
    return code.lower()


def src(site: Site | None) -> str:
    """`` `source text` `` of a site, or ''."""
    if site is None:
        return ""
    text = site.source()
    return f"`{text}`" if text else f"line {site.line}"


def listed(names: list[str], most: int = 6) -> str:
    """``names`` for a message: the first ``most`` distinct ones, a name that stands for several
    tensors (two unregistered instances of one layer class) with its count, and how many more."""
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    shown = [f"{n} ({k} tensors)" if k > 1 else n for n, k in list(counts.items())[:most]]
    more = len(counts) - most
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
