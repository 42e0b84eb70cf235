"""`gradtrace run` behaves like `python script.py`: argv, __main__, sys.path, exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gradtrace.runtime.runner import main

ROOT = Path(__file__).resolve().parents[2]


def test_argv_main_and_path(run_script, tmp_path):
    res = run_script("""
        import json, sys
        json.dump({"argv": sys.argv, "name": __name__, "p0": sys.path[0]},
                  open("seen.json", "w"))
    """, extra=[])
    assert res.code == 0
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["name"] == "__main__" and seen["argv"] == ["prog.py"]
    assert seen["p0"] == str(tmp_path)


def test_script_arguments_pass_through(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("import sys; open('a.txt', 'w').write(repr(sys.argv))\n")
    argv_before = sys.argv[:]
    assert main(["s.py", "--lr", "0.1", "-v"]) == 0
    assert (tmp_path / "a.txt").read_text() == repr(["s.py", "--lr", "0.1", "-v"])
    assert sys.argv == argv_before


@pytest.mark.parametrize("body,code", [("sys.exit(3)", 3), ("sys.exit(0)", 0), ("sys.exit()", 0),
                                       ("sys.exit('bye')", 1), ("raise ValueError('x')", 1)])
def test_exit_codes(run_script, body, code):
    res = run_script(f"import sys\n{body}\n")
    assert res.code == code
    if "ValueError" in body:
        assert "Traceback (most recent call last)" in res.err and "ValueError: x" in res.err
        assert "gradtrace" not in res.err and "runpy" not in res.err  # an unrelated error


def test_usage_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["missing.py"]) == 2
    assert "missing.py" in capsys.readouterr().err
    assert main(["--bogus", "x.py"]) == 2
    assert "--bogus" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--help"]) == 0
    assert "gradtrace run" in capsys.readouterr().out


def test_run_module(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = tmp_path / "trainpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(
        "import sys\nimport torch\nopen('m.txt', 'w').write(repr(sys.argv[1:]) + __name__)\n"
        "torch.zeros(2).sum().backward()\n")
    out = tmp_path / "f.json"
    assert main(["--json-out", str(out), "-m", "trainpkg.job", "x"]) == 1
    assert (tmp_path / "m.txt").read_text() == "['x']__main__"
    doc = json.loads(out.read_text())
    assert doc["tool"] == "gradtrace" and doc["findings"][0]["code"] == "GT800"
    assert doc["findings"][0]["line"] == 4


def test_quiet_prints_no_findings_but_writes_json(run_script):
    res = run_script("import torch\ntorch.zeros(2).sum().backward()\n", extra=["--quiet"])
    assert res.code == 1 and "gradtrace:" not in res.err and res.codes() == ["GT800"]


def test_keyboard_interrupt_is_exit_130_with_pythons_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text("raise KeyboardInterrupt\n")
    assert main(["k.py"]) == 130
    assert capsys.readouterr().err.endswith("    raise KeyboardInterrupt\nKeyboardInterrupt\n")


def test_report_unavailable_is_one_line_and_run_goes_on(run_script, monkeypatch):
    monkeypatch.setitem(sys.modules, "gradtrace.runtime.watch.watcher", None)
    res = run_script("print('ran')\n", extra=["--report", "r.html"])
    assert res.code == 0
    assert "--report unavailable" in res.err


def test_cli_subprocess_crash_stdin_stdout(tmp_path):
    (tmp_path / "t.py").write_text(
        "import sys, torch\nname = sys.stdin.readline().strip()\nprint('hello', name)\n"
        "w = torch.randn(3, requires_grad=True)\nloss = (w * 2).sum().item()\nloss.backward()\n")
    proc = subprocess.run([sys.executable, "-m", "gradtrace", "run", "--json-out", "o.json",
                           "t.py"], cwd=tmp_path, input="world\n", capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout == "hello world\n"
    assert "AttributeError: 'float' object has no attribute 'backward'" in proc.stderr
    assert "t.py:5:" in proc.stderr
    first = json.loads((tmp_path / "o.json").read_text())["findings"][0]
    assert first["line"] == 5 and first["source"] in ("runtime", "static+runtime")


def test_report_written_with_watch(run_script, tmp_path):
    res = run_script("""
        import torch
        import torch.nn as nn
        m = nn.Linear(3, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            m(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
    """, extra=["--report", "r.html"])
    assert res.code == 0, res.err
    html = (tmp_path / "r.html").read_text()
    assert html.startswith("<!DOCTYPE html>")

