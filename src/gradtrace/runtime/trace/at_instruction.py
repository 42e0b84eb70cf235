"""A fact about the instruction a user frame is running, read once per (code, offset).

Shared by the checks that read the calling statement's bytecode or syntax
(NOTE [functional dropout in eval], NOTE [in-place result used as a value]): the code
objects are kept alive while their ids are keys, and the cache is emptied past 4096 entries.
"""
from __future__ import annotations

from types import CodeType
from typing import Any, Callable


class InstructionFacts:
    """``(id(code), lasti) -> compute(code, lasti)``, cached."""

    def __init__(self, compute: Callable[[CodeType, int], Any], most: int = 4096) -> None:
        self.compute, self.most = compute, most
        self.facts: dict[tuple[int, int], Any] = {}
        self.codes: list[CodeType] = []  # ids of live codes are never reused

    def at(self, code: CodeType, lasti: int) -> Any:
        key = (id(code), lasti)
        hit = self.facts.get(key)
        if hit is None:
            if len(self.facts) > self.most:
                self.facts.clear()
                self.codes.clear()
            self.codes.append(code)
            hit = self.facts[key] = self.compute(code, lasti)
        return hit


__all__ = ["InstructionFacts"]
