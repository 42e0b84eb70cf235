"""One catalogue of every code gradtrace can print: engine, static rules and runtime findings.

Torch-free, and the runtime tables import nothing from :mod:`gradtrace.lint`: the static rules
are read from the rule registry only when a function here is asked for them (they stay
discovered classes, NOTE [one catalogue]). ``gradtrace rules``, ``gradtrace explain``,
``docs/rules.md``, the SARIF rule metadata and the runtime findings' names all read this.

# NOTE [one catalogue]
Adding a code touches one place plus the generated docs:
- a static rule: its class in ``gradtrace/lint/rules/`` (code, name, docstring, examples);
- a runtime code: one :class:`Code` entry in the table of its product
  (``code_tables/trace.py`` GT800-GT835, GT839-GT841; ``code_tables/trace_silent.py`` GT836-GT838,
  GT842-GT849, GT857, GT858, GT862, GT865, GT866; ``code_tables/trace_silent_train.py`` GT859,
  GT870-GT879, GT889-GT895; ``code_tables/trace_silent_across.py`` GT860, GT861, GT863,
  GT864, GT867, GT868, GT869, GT896-GT899; ``code_tables/watch.py`` GT850-GT856;
  ``code_tables/distributed.py`` GT880-GT888. The first ranges (trace GT800-GT849, watch
  GT850-GT879, distributed GT880-GT899) are full or shared: a new runtime code takes a free
  number (GT867 taken in session 49), naming the module that produces it;
  ``code_tables/trace_nine.py`` GT900-GT949 (opened in session 50; GT950 up is another table's);
then ``gradtrace rules --markdown > docs/rules.md``. ``tests/test_catalogue_of_codes.py`` checks that codes
and names are unique across all tables and that every entry is complete.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from gradtrace.code_tables import Code, distributed, engine, trace, trace_nine, trace_silent, watch

if TYPE_CHECKING:
    from gradtrace.lint.rule import Rule

__all__ = ["Code", "TABLE", "all_codes", "lookup", "name_of", "static_entry"]

# The engine and runtime codes (torch-free; no rule is imported), by code.
TABLE: dict[str, Code] = {c.code: c for t in (engine.CODES, trace.CODES, trace_silent.CODES,
                                               watch.CODES, distributed.CODES, trace_nine.CODES)
                          for c in t}


def static_entry(rule: type[Rule]) -> Code:
    """The catalogue entry of a static rule, read from its class."""
    from gradtrace.lint.rule import Bad, Good

    bad = next((e.code for e in rule.examples if isinstance(e, Bad)), "")
    good = next((e.code for e in rule.examples if isinstance(e, Good)), "")
    return Code(rule.code, rule.name, rule.summary(), rule.rationale(), bad, good,
                rule.fix_title or "", f"{rule.__module__}:{rule.__name__}", "static",
                rule.severity, rule.default, rule)


def all_codes() -> tuple[Code, ...]:
    """Every code gradtrace can print, sorted by code (imports the static rules)."""
    from gradtrace.lint.registry import all_rules

    found = dict(TABLE)
    found.update((r.code, static_entry(r)) for r in all_rules())
    return tuple(found[c] for c in sorted(found))


def lookup(code_or_name: str) -> Code | None:
    """The entry with this code or name (case-insensitive), or None."""
    key = code_or_name.strip()
    entry = TABLE.get(key.upper())
    if entry is not None:
        return entry
    for c in all_codes():
        if c.code == key.upper() or c.name == key.lower():
            return c
    return None


def name_of(code: str) -> str:
    """The kebab-case name of any code gradtrace prints; KeyError names an unknown code."""
    entry = TABLE.get(code) or lookup(code)
    if entry is None:
        raise KeyError(f"unknown code {code!r}: not in gradtrace.codes")
    return entry.name
