"""Issue 15's command-line papercuts, each as a user meets it: real `gradtrace` subprocesses
(`cli`) for `run`'s output options and a script's encoding; the same `main(argv)` in this
process (`cli_inproc`, tests/conftest.py) for standard input and Ctrl-C under `run` (the real
stream and the real `run` process: tests/test_cli.py::test_stdin,
tests/runtime/test_runner.py::test_cli_subprocess_crash_stdin_stdout) and for what `check`,
`explain` and `rules` print."""
from __future__ import annotations

import sys

import pytest

from tests.test_cli import BUG, SEL

# BUG has one GT101 finding with a safe fix, plus GT505 (fixable) in LOOP below.
LOOP = """\
import torch
total = 0.0
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    total += loss
history.append(total)
"""


def test_missing_path_never_reads_all_checks_passed(cli_inproc):
    r = cli_inproc("check", "nope.py")
    assert r.returncode == 2
    assert b"nope.py: no such file or directory" in r.stderr
    assert b"All checks passed" not in r.stdout + r.stderr


def test_statistics_with_quiet_prints_only_the_counts(cli_inproc):
    cli_inproc.write("bug.py", BUG)
    r = cli_inproc("check", *SEL, "bug.py", "-q", "--statistics")
    assert r.returncode == 1
    assert r.stdout == b"1\tGT101\tbackward-on-python-number\n"


def test_stdin_fix_prints_the_source_and_reports_what_remains(cli_inproc):
    cli = cli_inproc  # stdin's real stream: tests/test_cli.py::test_stdin
    two = BUG + "y = torch.tensor(3.0)\ny.item().backward()\n"
    r = cli("check", "--select", "GT101", "--stdin-filename", "m.py", "--fix",
            input=two.encode())
    fixed = two.replace("loss.item().backward()", "loss.backward()")
    assert r.stdout.decode() == fixed.replace("y.item().backward()", "y.backward()")
    assert r.returncode == 0 and b"Fixed 2 errors." in r.stderr
    r = cli("check", "--select", "GT101,GT505", "--stdin-filename", "m.py", "--fix",
            input=LOOP.encode())  # the GT505 fix here is unsafe: it stays
    assert r.stdout.decode() == LOOP
    assert r.returncode == 1 and b"m.py:6:5: GT505" in r.stderr


def test_dash_reads_standard_input(cli_inproc):
    cli = cli_inproc  # stdin's real stream: tests/test_cli.py::test_stdin
    r = cli("check", *SEL, "-", "--no-show-source", input=BUG.encode())
    assert r.returncode == 1 and r.stdout.startswith(b"-:3:1: GT101 ")
    r = cli("check", *SEL, "-", "other.py", input=BUG.encode())
    assert r.returncode == 2 and b"cannot be combined" in r.stderr


@pytest.mark.parametrize("option", ["--json-out", "--report"])
def test_run_output_into_a_missing_folder_is_exit_2_before_running(cli, option):
    cli.write("s.py", "open('ran.txt', 'w').write('yes')\n")
    r = cli("run", option, "nowhere/out.file", "s.py")
    assert r.returncode == 2 and b"no such folder 'nowhere'" in r.stderr
    assert not (cli.cwd / "ran.txt").exists()


@pytest.mark.parametrize("data", [
    b'print("caf\xe9")\n',                                  # no declaration: Non-UTF-8
    b'x = 1\n# caf\xe9\nprint("x")\n',                      # in a comment: compile() accepts
    b'# coding: ascii\n# caf\xe9\nprint("x")\n',            # declared, not decodable
    b'# coding: latin-1\nprint("caf\xe9")\n',               # declared and fine
    b'\xef\xbb\xbf# caf\xe9\nprint("x")\n',                 # a BOM: Python runs it
])
def test_script_encoding_behaves_exactly_like_python(tmp_path, monkeypatch, capfd, data):
    """python in a subprocess; `gradtrace run` in-process (torch is imported once)."""
    import subprocess

    from gradtrace.runtime.runner import main

    (tmp_path / "s.py").write_bytes(data)
    py = subprocess.run([sys.executable, "s.py"], cwd=tmp_path, capture_output=True, text=True)
    monkeypatch.chdir(tmp_path)
    code = main(["--quiet", "s.py"])
    out, err = capfd.readouterr()
    assert (code, out) == (py.returncode, py.stdout)
    assert err.strip() == py.stderr.strip()


@pytest.mark.parametrize("text", ["RuntimeError: element 0 of tensors ...",
                                  "element 0 of tensors does not requ...",
                                  "does not require grad and does not have a grad_fn"])
def test_explain_matches_a_prefix_or_the_distinctive_words(cli_inproc, text):
    r = cli_inproc("explain", text)
    assert r.returncode == 0 and r.stdout.startswith(b"GT800 ")


def test_explain_unknown_words_still_exit_2(cli_inproc):
    r = cli_inproc("explain", "RuntimeError: the cat sat on the mat")
    assert r.returncode == 2 and b"no rule and no known PyTorch error" in r.stderr


def test_ctrl_c_under_run_prints_pythons_traceback_only(cli_inproc):
    # in this process (`gradtrace run`'s real subprocess face: tests/runtime/test_runner.py's
    # test_cli_subprocess_crash_stdin_stdout): the runner turns KeyboardInterrupt into 130 itself
    cli = cli_inproc
    cli.write("k.py", """
        import torch
        def f():
            raise KeyboardInterrupt
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
        f()
    """)
    r = cli("run", "k.py")
    assert r.returncode == 130
    assert r.stderr.decode().splitlines() == [
        "Traceback (most recent call last):", f'  File "{cli.cwd / "k.py"}", line 6, in <module>',
        "    f()", f'  File "{cli.cwd / "k.py"}", line 3, in f', "    raise KeyboardInterrupt",
        "KeyboardInterrupt"]


def test_sarif_has_fixes_and_uris_relative_to_srcroot(cli_inproc):
    import json

    cli_inproc.write("pkg/bug.py", BUG)
    r = cli_inproc("check", *SEL, "--format", "sarif", "pkg")
    run = json.loads(r.stdout)["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == cli_inproc.cwd.as_uri() + "/"
    res = run["results"][0]
    where = res["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where == {"uri": "pkg/bug.py", "uriBaseId": "%SRCROOT%"}
    change = res["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"] == where
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 3, "startColumn": 1, "endLine": 3, "endColumn": 12},
        "insertedContent": {"text": "loss"}}]


def test_gt505_is_listed_as_fixed_safe_or_unsafe_as_each_finding_says(cli_inproc):
    rules = cli_inproc("rules").stdout.decode()
    assert next(line for line in rules.splitlines() if line.startswith("GT505")).split()[3] \
        == "fix/unsafe"
    assert "safe or unsafe, as each finding says" in cli_inproc("explain", "GT505").stdout.decode()


def test_readme_claims_about_rules_pre_commit_and_install_hold():
    from pathlib import Path

    from gradtrace.lint.registry import all_rules

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert "Every rule is on by default" in readme and all(r.default for r in all_rules())
    assert "rev: <a tag>" not in readme and "- id: gradtrace" in readme
    assert "- id: gradtrace" in (root / ".pre-commit-hooks.yaml").read_text()
    assert "print(w.report.summary())" in readme
    assert "pip install torch==2.13.0 -e '.[torch]'" in readme
    assert '"numpy"' in (root / "pyproject.toml").read_text().split("[project.optional-dep")[1]
