"""Building rank 0's merged findings: a runtime finding with one of the codes of
:mod:`gradtrace.code_tables.distributed`, and the texts naming ranks and parameters."""
from __future__ import annotations

from typing import Any, Iterable

from gradtrace.codes import name_of
from gradtrace.findings import Finding, Fix, Related
from gradtrace.runtime.build import display_path

Rec = dict[str, Any]


def make(code: str, site: Any, message: str, fix: str = "", related: Iterable[Any] = (),
         severity: str = "error") -> Finding:
    """A runtime finding with one of the codes of :mod:`gradtrace.code_tables.distributed`."""
    rel = tuple(Related(display_path(s[0]), int(s[1]), m) for s, m in related if s)
    return Finding(code=code, name=name_of(code), message=message,
                   path=display_path(site[0]) if site else "<unknown>",
                   line=int(site[1]) if site else 1, severity=severity,  # type: ignore[arg-type]
                   related=rel, fix=Fix(fix, "unsafe") if fix else None, source="runtime")


def ranks_text(ranks: Iterable[int]) -> str:
    """``rank 1`` / ``ranks 0, 2``."""
    rs = sorted(set(ranks))
    return f"rank {rs[0]}" if len(rs) == 1 else "ranks " + ", ".join(map(str, rs))


def _shown(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
