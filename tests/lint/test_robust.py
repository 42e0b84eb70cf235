"""No nesting ast.parse accepts breaks the checker; a rule that raises costs only its own
findings on that file (a GT002 finding, exit 2), in the CLI and under real flake8."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.cli import main
from gradtrace.lint import check_source
from gradtrace.lint.registry import ENGINE_CODES, all_rules

HEAD = ("import torch\nimport torch.nn.functional as F\nmodel = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n")
CHAIN = ".detach()" * 500


def _in_loop(body: str) -> str:
    return HEAD + "for x, y in loader:\n" + textwrap.indent(body, "    ") + "\n"


@pytest.mark.parametrize(("body", "expected"), [
    (f"model(x){CHAIN}.sum().backward()", {("GT107", 6)}),
    (f"loss = F.mse_loss(model(x){CHAIN}, y)\nloss.backward()", {("GT107", 6)}),
    (f"with torch.no_grad():\n    h = model(x){CHAIN}\nloss = h.sum()\nloss.backward()",
     {("GT107", 7), ("GT201", 6)}),
    ("loss = " + " + ".join(["model(x).sum()"] * 1000) + "\nloss.item().backward()",
     {("GT101", 7)}),
    (f"y = torch.tensor(model(x){CHAIN}.item(), requires_grad=True)\ny.backward()",
     {("GT102", 6), ("GT106", 6)}),
    ("out = model(x)" + "[0]" * 1000 + "\nloss = -" + "-" * 1000 + "out.sum()\nloss.backward()",
     set()),
])
def test_deep_expressions_do_not_break_the_checker(body, expected, monkeypatch):
    monkeypatch.setenv("GRADTRACE_STRICT", "1")  # any exception fails the test
    found = {(f.code, f.line) for f in check_source(_in_loop(body))}
    assert found == expected


def test_too_deep_for_ast_parse_is_a_gt000_finding():
    src = HEAD + "out = model(x)" + ".detach()" * 5000 + "\n"
    assert [(f.code, f.line) for f in check_source(src)] == [("GT000", 1)]


def _boom(self, node, ctx):
    raise RecursionError("maximum recursion depth exceeded")


@pytest.fixture()
def crashing_gt101(monkeypatch):
    """GT101's visitor raises on every call it sees."""
    monkeypatch.delenv("GRADTRACE_STRICT", raising=False)
    rule = next(r for r in all_rules() if r.code == "GT101")
    monkeypatch.setattr(rule, "visit_Call", _boom)


BAD = "import torch\nx = torch.ones(1)\nx.item().backward()\nloss = f(x)\nloss.item().backward()\n"
OTHER = "import torch\nw = torch.zeros(2, requires_grad=True).cuda()\nw.grad\n"


def test_a_rule_that_raises_gives_gt002_and_the_other_rules_still_run(crashing_gt101):
    src = BAD + OTHER.replace("import torch\n", "")
    found = [(f.code, f.line) for f in check_source(src)]
    assert ("GT002", 3) in found and not any(c == "GT101" for c, _ in found)
    assert len([c for c, _ in found if c == "GT002"]) == 1  # the rule stops on that file
    assert any(c.startswith("GT3") or c.startswith("GT2") or c.startswith("GT4")
               for c, _ in found if c != "GT002")
    crash = next(f for f in check_source(src) if f.code == "GT002")
    assert crash.message.startswith("internal error in GT101 at gradtrace/") and \
        "RecursionError" in crash.message
    assert "GT002" in ENGINE_CODES


def test_cli_reports_every_file_and_exits_2(crashing_gt101, tmp_path, capsys):
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(OTHER)
    code = main(["check", "--no-cache", "--jobs", "1", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2
    assert "a.py:3:1: GT002 internal error in GT101" in out
    assert "b.py:2:" in out  # the other file's findings are still reported
    assert "GT101" in err and "a.py" in err


def test_flake8_reports_a_crash_as_a_finding(tmp_path, capsys, monkeypatch):
    """flake8's own `main` in this process (tests/lint/test_flake8_plugin.py runs the real
    `python -m flake8` entry point once): a rule raising RecursionError is a GT002 finding."""
    from flake8.main.cli import main as flake8_main

    (tmp_path / "t.py").write_text(BAD)

    def boom(self, node, ctx):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(next(r for r in all_rules() if r.code == "GT101"), "visit_Call", boom)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = flake8_main(["--select=GT", "t.py"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert out.startswith("t.py:3:1: GT002 internal error in GT101 at gradtrace/")
    assert code == 1
