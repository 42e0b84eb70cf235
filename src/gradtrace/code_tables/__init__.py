"""The data of :mod:`gradtrace.codes`: the :class:`Code` record and one table per product.

Imports nothing from gradtrace, so every layer (lint, runtime, report) can read it without an
import cycle; :mod:`gradtrace.codes` joins these tables with the static rules.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Literal

Source = Literal["engine", "static", "runtime"]


@dataclass(frozen=True)
class Code:
    """One code: identity, the full text (what, why, a bad and a good example, the fix) and
    ``producer``, the module (or ``module:Class``) that reports it."""

    code: str
    name: str
    summary: str
    why: str
    bad: str
    good: str
    fix: str
    producer: str
    source: Source = "runtime"
    severity: str = "error"
    default: bool = True
    rule: Any = None  # the rule class of a static code

    @property
    def bad_code(self) -> str:
        return textwrap.dedent(self.bad).strip("\n") + "\n"

    @property
    def good_code(self) -> str:
        return textwrap.dedent(self.good).strip("\n") + "\n"


