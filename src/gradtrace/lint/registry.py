"""Rule discovery (no hand-kept list) and --select/--ignore prefix logic."""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Iterable, Sequence

from gradtrace.code_tables import Code, engine
from gradtrace.errors import ConfigError
from gradtrace.lint.rule import CODE_RE, NAME_RE, Rule

# Codes that are not rules but are reported by the engine itself; their entries:
# NOTE [one catalogue] in gradtrace.codes.
ENGINE_CODES: dict[str, Code] = {c.code: c for c in engine.CODES}


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every concrete Rule subclass defined in ``gradtrace.lint.rules.*``, sorted by code."""
    import gradtrace.lint.rules as pkg

    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
    found: dict[str, type[Rule]] = {}
    stack = list(Rule.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.code and cls.__module__.startswith(pkg.__name__ + "."):
            other = found.get(cls.code)
            if other is not None and other is not cls:
                raise ConfigError(f"duplicate rule code {cls.code}: {other.__name__}, {cls.__name__}")
            found[cls.code] = cls
    return tuple(sorted(found.values(), key=lambda c: c.code))


def validate_rule(cls: type[Rule]) -> list[str]:
    """Problems with a rule's identity and examples (empty when fine). Used by the tests."""
    problems = []
    if not CODE_RE.match(cls.code):
        problems.append(f"{cls.__name__}: code {cls.code!r} is not GTnnn")
    if not NAME_RE.match(cls.name):
        problems.append(f"{cls.__name__}: name {cls.name!r} is not kebab-case")
    camel = "".join(p.capitalize() for p in cls.name.split("-"))
    if cls.__name__ != camel:
        problems.append(f"{cls.__name__}: class name should be {camel}")
    if not cls.triggers:
        problems.append(f"{cls.__name__}: no trigger words")
    if not cls.__doc__:
        problems.append(f"{cls.__name__}: no docstring")
    if cls.fix_safety not in (None, "safe", "unsafe"):
        problems.append(f"{cls.__name__}: fix_safety {cls.fix_safety!r}")
    return problems


def _matches(code: str, prefixes: Iterable[str]) -> int:
    """Length of the longest prefix in ``prefixes`` matching ``code`` (0 = none)."""
    best = 0
    for p in prefixes:
        if p == "ALL":
            best = max(best, 1)
        elif code.startswith(p):
            best = max(best, len(p) + 1)
    return best


def check_prefixes(prefixes: Sequence[str], option: str) -> list[str]:
    """Validate code prefixes (``GT1``, ``GT105``, ``ALL``); raise ConfigError naming the option."""
    out = []
    known = [c.code for c in all_rules()] + list(ENGINE_CODES)
    for raw in prefixes:
        p = raw.strip().upper()
        if not p:
            continue
        if p != "ALL" and not any(code.startswith(p) for code in known):
            raise ConfigError(f"{option}: unknown rule code or prefix {raw!r} "
                              f"(codes look like GT101; prefixes like GT1; or ALL)")
        out.append(p)
    return out


def select_rules(select: Sequence[str] | None = None, ignore: Sequence[str] = (),
                 extend_select: Sequence[str] = ()) -> list[type[Rule]]:
    """Rules enabled by ruff-style selection: the most specific matching prefix wins.

    Without ``select`` the default rules are on (9xx rules are off unless selected).
    """
    rules = all_rules()
    key = (id(rules), None if select is None else tuple(select), tuple(ignore),
           tuple(extend_select))
    got = _SELECTED.get(key)
    if got is None or got[0] is not rules:  # NOTE [selection memo]
        chosen = []
        for cls in rules:
            sel = _matches(cls.code, select) if select is not None else (1 if cls.default else 0)
            sel = max(sel, _matches(cls.code, extend_select))
            ign = _matches(cls.code, ignore)
            if sel and sel > ign:
                chosen.append(cls)
        if len(_SELECTED) >= 64:
            _SELECTED.clear()
        got = _SELECTED[key] = (rules, tuple(chosen))
    return list(got[1])


# NOTE [selection memo]
# `check_source`, `check_text` and `gradtrace run`'s fuse select the rules once per file: the
# walk over every rule's code and the prefixes was ~1.5% of a real-world case's check and ~5% of
# a short snippet's (most of the test suite's checks). The answer depends only on the rules
# `all_rules()` gives (held here, so that a tuple made by a stand-in is compared by identity and
# its id is never reused while kept) and the three selections; each caller gets its own list.
_SELECTED: dict[tuple, tuple[tuple[type[Rule], ...], tuple[type[Rule], ...]]] = {}


def code_enabled(code: str, select: Sequence[str] | None, ignore: Sequence[str],
                 extend_select: Sequence[str] = ()) -> bool:
    """Whether an engine code (GT000/GT001) is reported under this selection."""
    sel = _matches(code, select) if select is not None else 1
    sel = max(sel, _matches(code, extend_select))
    return bool(sel) and sel > _matches(code, ignore)
