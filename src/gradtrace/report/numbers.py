"""How the reports and the watch findings' messages print a number."""
from __future__ import annotations


def fmt(x: float | None) -> str:
    """A short number for messages: 3 significant digits, or scientific notation."""
    if x is None:
        return "-"
    if x == 0 or (1e-3 <= abs(x) < 1e4):
        return f"{x:.3g}"
    return f"{x:.1e}"
