"""One catalogue of codes (gradtrace.codes): unique, complete, documented, torch-free."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from gradtrace.codes import TABLE, all_codes, lookup, name_of
from gradtrace.docs import explain_code, rules_markdown, rules_table

SRC = Path(__file__).resolve().parents[1] / "src"


def test_codes_and_names_are_unique_across_static_and_runtime():
    codes = all_codes()
    assert len({c.code for c in codes}) == len(codes)
    names = [c.name for c in codes]
    assert sorted(n for n in names if names.count(n) > 1) == []
    assert name_of("GT825") != name_of("GT851")


def test_every_runtime_entry_is_complete_and_names_its_producer():
    for c in TABLE.values():
        assert c.summary and c.why and c.bad and c.good and c.fix, c.code
        if c.code != "GT000":  # its bad example is a syntax error
            ast.parse(c.bad_code), ast.parse(c.good_code)
        assert c.bad_code != c.good_code, c.code
        path = SRC / (c.producer.replace(".", "/") + ".py")
        package = SRC / c.producer.replace(".", "/") / "__init__.py"
        assert path.is_file() or package.is_file(), (c.code, c.producer)


def test_every_runtime_code_is_written_where_its_entry_says_it_is_made():
    """One hop from the catalogue: the producer's source holds the code, or the code is a
    PyTorch error's (its pattern in the error catalogue names it) and the producer is the
    diagnoser that turns a matched pattern into a finding, or the code is a pattern's own
    diagnosis and the producer is the module of the function the post-hoc table runs for it."""
    from gradtrace.runtime.catalogue import PATTERNS
    from gradtrace.runtime.trace.posthoc import _POSTHOC

    patterns = {p.code for p in PATTERNS}
    diagnosed = {p.diagnosis: _POSTHOC[p.key].__module__ for p in PATTERNS if p.diagnosis}
    for c in TABLE.values():
        path = SRC / (c.producer.replace(".", "/") + ".py")
        if not path.is_file():
            path = SRC / c.producer.replace(".", "/") / "__init__.py"
        made_here = f'"{c.code}"' in path.read_text(encoding="utf-8")
        by_pattern = c.code in patterns and c.producer == "gradtrace.runtime.trace.diagnose"
        by_diagnosis = diagnosed.get(c.code) == c.producer
        assert made_here or by_pattern or by_diagnosis, (c.code, c.producer)


def test_static_entries_name_their_rule_class():
    static = [c for c in all_codes() if c.source == "static"]
    assert static and all(c.rule is not None for c in static)
    for c in static:
        module, cls = c.producer.split(":")
        assert getattr(sys.modules[module], cls) is c.rule


def test_every_code_is_listed_and_explained_in_full():
    table, doc = rules_table(), rules_markdown()
    for c in all_codes():
        assert f"{c.code}  {c.name}" in table
        assert f"### {c.code} {c.name}" in doc
        text = explain_code(c)
        assert "Bad:" in text and "Good:" in text and c.producer.split(":")[0] in text, c.code


def test_lookup_and_name_of_agree_on_unknown_codes():
    assert lookup("GT800") is TABLE["GT800"] and lookup("backward-without-graph").code == "GT800"
    assert lookup("GT101").rule is not None and lookup("gt101").code == "GT101"
    assert lookup("GT999") is None
    try:
        name_of("GT999")
    except KeyError as exc:
        assert "GT999" in str(exc)
    else:
        raise AssertionError("name_of accepted an unknown code")


def test_the_runtime_tables_are_torch_free_and_import_no_rule():
    code = ("import sys, gradtrace.codes as c; c.name_of('GT851'); "
            "print('torch' in sys.modules, any(m.startswith('gradtrace.lint') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=60)
    assert out.stdout.split() == ["False", "False"]


def test_every_code_the_runtime_makes_is_catalogued():
    """A finding the runtime makes (``make("GTnnn", ...)``, ``code_for(name, "GTnnn")``) has an
    entry, so ``gradtrace explain`` and the JSON name it (GT879 was made without one)."""
    import re

    known = {c.code for c in all_codes()}
    made = re.compile(r'(?:make|code_for)\((?:"[\w-]+", )?"(GT\d{3})"')
    for path in (SRC / "gradtrace" / "runtime").rglob("*.py"):
        for code in made.findall(path.read_text(encoding="utf-8")):
            assert code in known, (code, path.name)
