"""Environment switches are read in one place, with one meaning of on and off."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gradtrace import env
from src_trees import GROUP, tree

SRC = Path(__file__).resolve().parents[1] / "src" / "gradtrace"
# one xdist worker for the tests that parse src/ with ast: each file parsed once (src_trees.py)
pytestmark = pytest.mark.xdist_group(GROUP)


@pytest.mark.parametrize("value, on", [("", False), ("0", False), ("false", False),
                                       (" Off ", False), ("NO", False), ("1", True),
                                       ("yes", True), ("true", True)])
def test_a_switch_is_off_for_empty_zero_false_no_off(value, on, monkeypatch):
    monkeypatch.setenv(env.STRICT, value)
    assert env.strict() is on
    assert env.is_on(env.NO_CACHE, {env.NO_CACHE: value}) is on


def test_unset_is_off(monkeypatch):
    monkeypatch.delenv(env.STRICT, raising=False)
    assert env.strict() is False


def test_only_env_module_spells_a_switch_name():
    """Every GRADTRACE_* name in code (not docs) is one of env.py's constants, used there only."""
    names = {v for k, v in vars(env).items() if k.isupper() and isinstance(v, str)
             and v.startswith("GRADTRACE_")}
    for path in SRC.rglob("*.py"):
        if path.name == "env.py":
            continue
        docstrings, spelled = set(), []  # one walk collects both
        for n in ast.walk(tree(path)):
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body \
                    and isinstance(n.body[0], ast.Expr):
                docstrings.add(id(n.body[0].value))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names:
                spelled.append(n)
        for node in spelled:
            assert id(node) in docstrings, f"{path}: {node.value} read outside env.py"


def test_cli_strict_zero_is_off(monkeypatch, capsys):
    from gradtrace.cli import check, main

    def boom(ns):
        raise RuntimeError("boom")

    monkeypatch.setattr(check, "run", boom)
    monkeypatch.setenv(env.STRICT, "0")
    assert main(["check", "x.py"]) == 2
    assert "internal error: RuntimeError: boom" in capsys.readouterr().err
    monkeypatch.setenv(env.STRICT, "1")
    with pytest.raises(RuntimeError):
        main(["check", "x.py"])


def test_commands_never_import_the_cli_package():
    for path in (SRC / "cli").glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradtrace.cli"):
                assert node.module == "gradtrace.cli._common", (path.name, node.module)
