"""Members of an ``Enum`` class of the file as flag values (NOTE [enum flags]).

# NOTE [enum flags]
``class Kind(enum.Enum): LEARNED = "learned"; FIXED = "fixed"``: ``Kind.LEARNED`` and
``Kind.FIXED`` are distinct members (distinct values; two names with one value are one member,
Python's aliases), so ``self.kind == Kind.LEARNED`` is decided once the constructor gave
``self.kind`` a member. A member compares with another member of its class by value; with
anything else (a string, an int: a ``str``/``int`` mix-in may equal it) and as a bare truth
value it decides nothing (:class:`EnumMember` raises ``TypeError``, which
:func:`.flag_truth.truth_under` reads as unknown). Only classes whose bases are all ``Enum``
words of the ``enum`` module (``Enum``, ``IntEnum``, ``StrEnum``, ``Flag`` are not: a ``Flag``
member may be a union) and whose members are constants or ``auto()``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_ENUMS = frozenset({"enum.Enum", "enum.IntEnum", "enum.StrEnum"})


class EnumMember:
    """One member: equal to another member of its class with the same value."""

    __slots__ = ("cls", "value")

    def __init__(self, cls: str, value: object) -> None:
        self.cls, self.value = cls, value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnumMember):
            raise TypeError("an enum member against another value: not known")
        return (self.cls, self.value) == (other.cls, other.value)

    def __hash__(self) -> int:
        return hash((self.cls, self.value))

    def __bool__(self) -> bool:
        raise TypeError("an enum member's truth: not known")


def enum_members(ctx: Context) -> dict[str, EnumMember]:
    """``"Cls.NAME"`` -> its member, for the ``Enum`` classes of the file (NOTE [enum flags])."""
    def make() -> dict[str, EnumMember]:
        out: dict[str, EnumMember] = {}
        for c in ctx.tree.body:
            if not isinstance(c, ast.ClassDef) or not c.bases or not all(
                    (ctx.qualified_name(b) or "") in _ENUMS for b in c.bases):
                continue
            for s in c.body:
                if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                        and isinstance(s.targets[0], ast.Name)):
                    continue
                name, v = s.targets[0].id, s.value
                if isinstance(v, ast.Constant):
                    out[f"{c.name}.{name}"] = EnumMember(c.name, v.value)
                elif isinstance(v, ast.Call) and not v.args and not v.keywords \
                        and (ctx.qualified_name(v.func) or "") == "enum.auto":
                    out[f"{c.name}.{name}"] = EnumMember(c.name, ("auto", name))
        return out
    return ctx.memo("enum-members", ctx.tree, make)
