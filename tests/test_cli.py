"""`gradtrace check` end to end: exit codes, options, bad input. The entry point's own tests
(exit status, usage errors, stdin, --jobs' process pool, a fresh process never importing
torch, `gradtrace demo`) run the real `python -m gradtrace` in a subprocess (`cli`), once each;
the others, and the further calls of those tests, call the same `main(argv)` in this process
(`cli_inproc`, tests/conftest.py: ~0.4 s of CPU less per call)."""
from __future__ import annotations

import json
import os
import sys

import pytest

BUG = """\
import torch
loss = torch.nn.functional.mse_loss(model(x), y)
loss.item().backward()
"""
CLEAN = """\
import torch
loss = torch.nn.functional.mse_loss(model(x), y)
loss.backward()
"""


# The CLI tests pin the selection to the engine codes and GT101, so that new rules (which may
# also fire on these snippets) do not change them; rules have their own tests.
SEL = ("--select", "GT0,GT101")


def codes_lines(stdout: bytes) -> list[tuple[str, int]]:
    doc = json.loads(stdout)
    return [(f["code"], f["line"]) for f in doc["findings"]]


def test_exit_codes_clean_findings_and_usage(cli, cli_inproc):
    # the real process for a finding's exit 1 and a usage error's exit 2; main() for the rest
    cli.write("clean.py", CLEAN)
    cli.write("bug.py", BUG)
    assert cli_inproc("check", *SEL, "clean.py").returncode == 0
    r = cli("check", *SEL, "bug.py")
    assert r.returncode == 1
    assert b"bug.py:3:1: GT101" in r.stdout
    assert cli_inproc("check", *SEL, "bug.py", "--exit-zero").returncode == 0
    r = cli("check", *SEL, "--format", "yaml", "bug.py")
    assert r.returncode == 2 and b"invalid choice: 'yaml'" in r.stderr


def test_default_path_is_current_folder_and_paths_are_relative(cli_inproc):
    cli_inproc.write("pkg/bug.py", BUG)
    r = cli_inproc("check", *SEL, "--format", "json")
    assert json.loads(r.stdout)["findings"][0]["path"] == os.path.join("pkg", "bug.py")


def test_json_schema_is_exact(cli_inproc):
    cli_inproc.write("bug.py", BUG)
    doc = json.loads(cli_inproc("check", *SEL, "bug.py", "--format", "json").stdout)
    assert set(doc) == {"tool", "version", "findings"} and doc["tool"] == "gradtrace"
    f = doc["findings"][0]
    assert set(f) == {"code", "name", "severity", "message", "path", "line", "column",
                      "end_line", "end_column", "related", "fix", "source"}
    assert (f["line"], f["column"], f["end_line"], f["end_column"]) == (3, 1, 3, 23)
    assert set(f["fix"]) == {"title", "safety", "edits"} and f["source"] == "static"
    assert f["fix"]["edits"][0] == {"line": 3, "column": 1, "end_line": 3, "end_column": 12,
                                    "content": "loss"}


def test_missing_path_is_named_exit_2_and_the_rest_is_checked(cli_inproc):
    cli_inproc.write("bug.py", BUG)
    r = cli_inproc("check", *SEL, "nope.py", "bug.py")
    assert r.returncode == 2
    assert b"nope.py: no such file or directory" in r.stderr
    assert b"bug.py:3:1: GT101" in r.stdout
    assert b"Traceback" not in r.stderr


def test_syntax_error_is_gt000_and_other_files_are_checked(cli_inproc):
    cli_inproc.write("broken.py", "import torch\ndef f(:\n    pass\n")
    cli_inproc.write("bug.py", BUG)
    r = cli_inproc("check", *SEL, ".", "--format", "json")
    assert sorted(codes_lines(r.stdout)) == [("GT000", 2), ("GT101", 3)]
    assert r.returncode == 1


def test_encodings_bom_crlf_tabs_empty(cli_inproc):
    (cli_inproc.cwd / "latin.py").write_bytes(
        b"import torch\nname = '\xe9'\nloss.item().backward()\n")
    (cli_inproc.cwd / "cookie.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9'\nloss.item().backward()\n")
    (cli_inproc.cwd / "bom.py").write_bytes(b"\xef\xbb\xbf" + BUG.encode())
    (cli_inproc.cwd / "crlf.py").write_bytes(BUG.replace("\n", "\r\n").encode())
    (cli_inproc.cwd / "tabs.py").write_bytes(b"import torch\nif True:\n\tloss.item().backward()\n")
    (cli_inproc.cwd / "empty.py").write_bytes(b"")
    r = cli_inproc("check", *SEL, ".", "--format", "json")
    got = {(f["path"], f["code"], f["line"], f["column"])
           for f in json.loads(r.stdout)["findings"]}
    assert got == {("latin.py", "GT000", 2, 1), ("cookie.py", "GT101", 4, 1),
                   ("bom.py", "GT101", 3, 1), ("crlf.py", "GT101", 3, 1),
                   ("tabs.py", "GT101", 3, 2)}
    assert b"Traceback" not in r.stderr


def test_non_ascii_columns_are_characters(cli_inproc):
    cli_inproc.write("u.py", "import torch\nétat = 1; loss.item().backward()\n")
    f = json.loads(cli_inproc("check", *SEL, "u.py", "--format", "json").stdout)["findings"][0]
    assert (f["line"], f["column"]) == (2, 11)
    r = cli_inproc("check", *SEL, "u.py", "--fix")
    assert (cli_inproc.cwd / "u.py").read_text(encoding="utf-8").endswith("loss.backward()\n")
    assert r.returncode == 0


def test_large_file(cli_inproc):
    body = "".join(f"x{i} = torch.ones({i % 7})\n" for i in range(50_000))
    cli_inproc.write("big.py", "import torch\n" + body + BUG)
    r = cli_inproc("check", *SEL, "big.py", "--format", "json")
    assert codes_lines(r.stdout) == [("GT101", 50_004)]


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_symlink_loop_and_unreadable_file(cli_inproc):
    cli_inproc.write("bug.py", BUG)
    (cli_inproc.cwd / "loop").symlink_to(cli_inproc.cwd / "loop")
    os.symlink(cli_inproc.cwd / "sub", cli_inproc.cwd / "sub_link")
    (cli_inproc.cwd / "sub").mkdir()
    (cli_inproc.cwd / "sub" / "back").symlink_to(cli_inproc.cwd)
    (cli_inproc.cwd / "dangling.py").symlink_to(cli_inproc.cwd / "missing-target.py")
    r = cli_inproc("check", *SEL, ".", "--format", "json")
    assert sorted(codes_lines(r.stdout)) == [("GT001", 1), ("GT101", 3)]
    assert b"Traceback" not in r.stderr
    r = cli_inproc("check", *SEL, "loop", "--no-show-source")
    assert r.returncode == 1 and r.stdout.startswith(b"loop:1:1: GT001 cannot read file")


def test_python_312_syntax(cli_inproc):
    cli_inproc.write("match.py", """
        import torch
        match cmd:
            case "train":
                loss.item().backward()
        """)
    cli_inproc.write("typeparams.py",
                     "import torch\ndef first[T](xs: list[T]) -> T:\n    return xs[0]\n")
    cli_inproc.write("fstr.py", 'import torch\nwho = "x"\nmsg = f"{f"{who}"}"\n')
    r = cli_inproc("check", *SEL, ".", "--format", "json")
    got = sorted(codes_lines(r.stdout))
    if sys.version_info >= (3, 12):
        assert got == [("GT101", 4)]
    else:
        assert got == [("GT000", 2), ("GT000", 3), ("GT101", 4)]
    assert b"Traceback" not in r.stderr


def test_files_without_torch_are_skipped(cli_inproc):
    cli_inproc.write("plain.py", "loss.item().backward()\n")
    assert cli_inproc("check", *SEL, "plain.py").returncode == 0


def test_default_and_extra_excludes(cli_inproc):
    cli_inproc.write(".venv/lib/bug.py", BUG)
    cli_inproc.write("build/bug.py", BUG)
    cli_inproc.write("gen/bug.py", BUG)
    cli_inproc.write("src/bug.py", BUG)
    r = cli_inproc("check", *SEL, ".", "--extend-exclude", "gen", "--format", "json")
    assert [f["path"] for f in json.loads(r.stdout)["findings"]] == [os.path.join("src", "bug.py")]
    r = cli_inproc("check", *SEL, "build/bug.py")  # a file named explicitly is checked
    assert r.returncode == 1


def test_select_ignore_prefixes(cli_inproc):
    cli_inproc.write("bug.py", BUG)
    assert cli_inproc("check", "bug.py", "--select", "GT1").returncode == 1
    assert cli_inproc("check", "bug.py", "--ignore", "GT1").returncode == 0
    assert cli_inproc("check", "bug.py", "--select", "GT101", "--ignore", "GT101").returncode == 0
    assert cli_inproc("check", "bug.py", "--select", "GT101", "--ignore", "GT1").returncode == 1
    assert cli_inproc("check", "bug.py", "--ignore", "GT1",
                      "--extend-select", "GT101").returncode == 1
    assert cli_inproc("check", "bug.py", "--select", "ALL").returncode == 1
    r = cli_inproc("check", "bug.py", "--select", "GT999x")
    assert r.returncode == 2 and b"--select" in r.stderr and b"GT999x" in r.stderr


def test_noqa(cli_inproc):
    cli_inproc.write("n.py", """
        import torch
        a.item().backward()  # noqa
        b.item().backward()  # noqa: GT101
        c.item().backward()  # NOQA:GT1
        d.item().backward()  # noqa: GT2
        e.item().backward()  # noqa: E501, GT101
        """)
    r = cli_inproc("check", *SEL, "n.py", "--format", "json")
    assert codes_lines(r.stdout) == [("GT101", 5)]


def test_pyproject_config(cli_inproc):
    cli_inproc.write("pyproject.toml", """
        [tool.gradtrace]
        ignore = ["GT101"]
        per-file-ignores = {"tests/*" = ["GT1"]}
        extend-exclude = ["generated"]
        """)
    cli_inproc.write("bug.py", BUG)
    assert cli_inproc("check", *SEL, ".").returncode == 0
    cli_inproc.write("pyproject.toml", """
        [tool.gradtrace]
        per-file-ignores = {"tests/*" = ["GT1"]}
        extend-exclude = ["generated"]
        """)
    cli_inproc.write("tests/test_bug.py", BUG)
    cli_inproc.write("generated/bug.py", BUG)
    r = cli_inproc("check", *SEL, ".", "--format", "json")
    assert [f["path"] for f in json.loads(r.stdout)["findings"]] == ["bug.py"]


@pytest.mark.parametrize(("table", "needle"), [
    ('selct = ["GT1"]', b"unknown key 'selct'"),
    ('select = "GT1"', b"select must be a list"),
    ('ignore = ["XY9"]', b"'XY9'"),
    ("select = [", b"not valid TOML"),
])
def test_bad_config_is_exit_2_naming_key_and_file(cli_inproc, table, needle):
    cli_inproc.write("pyproject.toml", f"[tool.gradtrace]\n{table}\n")
    cli_inproc.write("bug.py", BUG)
    r = cli_inproc("check", *SEL, ".")
    assert r.returncode == 2
    assert needle in r.stderr and b"pyproject.toml" in r.stderr
    assert b"Traceback" not in r.stderr


def test_fix_then_second_fix_changes_nothing_and_diff_writes_nothing(cli_inproc):
    p = cli_inproc.write("bug.py", BUG)
    r = cli_inproc("check", *SEL, "bug.py", "--diff")
    assert r.returncode == 1 and b"+loss.backward()" in r.stdout
    assert p.read_text() == BUG
    r = cli_inproc("check", *SEL, "bug.py", "--fix")
    assert r.returncode == 0 and b"Fixed 1 error" in r.stdout
    assert p.read_text() == CLEAN
    r = cli_inproc("check", *SEL, "bug.py", "--fix")
    assert r.returncode == 0 and p.read_text() == CLEAN


def test_stdin(cli, cli_inproc):
    r = cli("check", *SEL, "--stdin-filename", "pkg/mod.py", "--format", "json",
            input=BUG.encode())
    doc = json.loads(r.stdout)
    assert [(f["path"], f["line"]) for f in doc["findings"]] == [("pkg/mod.py", 3)]
    r = cli_inproc("check", *SEL, "--stdin-filename", "mod.py", "--fix", input=BUG.encode())
    assert r.stdout.decode() == CLEAN


def test_output_statistics_and_jobs(cli, cli_inproc):
    # the real process for --jobs 2's process pool; main() in this process for the rest
    for i in range(12):
        cli.write(f"m{i}.py", BUG)
    r = cli_inproc("check", *SEL, ".", "--statistics", "-q", "--no-show-source")
    assert b"12\tGT101\tbackward-on-python-number" in r.stdout
    one = cli_inproc("check", *SEL, ".", "--format", "json", "--jobs", "1").stdout
    two = cli("check", *SEL, ".", "--format", "json", "--jobs", "2").stdout
    assert one == two and len(json.loads(one)["findings"]) == 12
    r = cli_inproc("check", *SEL, ".", "--format", "sarif", "--output", "out.sarif")
    assert r.returncode == 1 and r.stdout == b""
    assert json.loads((cli.cwd / "out.sarif").read_text())["version"] == "2.1.0"
    r = cli_inproc("check", *SEL, ".", "--jobs", "-3")
    assert r.returncode == 2 and b"--jobs" in r.stderr


def test_rules_explain_version(cli_inproc):
    r = cli_inproc("rules")
    assert r.returncode == 0 and b"GT101" in r.stdout and b"GT000" in r.stdout
    r = cli_inproc("explain", "GT101")
    assert r.returncode == 0 and b"Bad:" in r.stdout and b"Good:" in r.stdout
    assert cli_inproc("explain", "backward-on-python-number").stdout == r.stdout
    r = cli_inproc("explain", "GT1234")
    assert r.returncode == 2 and b"GT1234" in r.stderr
    from gradtrace import __version__

    assert cli_inproc("--version").stdout.decode().strip() == f"gradtrace {__version__}"


def test_checker_never_imports_torch(cli):
    cli.write("bug.py", BUG)
    code = ("import sys, gradtrace, gradtrace.cli as c; "
            "rc = c.main(['check', 'bug.py', '-q']); "
            "assert 'torch' not in sys.modules, 'torch imported'; print('rc', rc)")
    r = __import__("subprocess").run([sys.executable, "-c", code], cwd=cli.cwd,
                                     capture_output=True)
    assert b"rc 1" in r.stdout, r.stderr


def test_demo_checks_then_runs_the_broken_script(cli):
    r = cli("demo")
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 1
    assert "train.py:12:11: GT102" in out          # static: the .item() line
    assert "train.py:13:12: GT106" in out          # static: the requires_grad band-aid
    assert "problems seen (1)\n\ntrain.py:12:" in out + err  # runtime: the same line,
    assert "confirmed at run time (GT102)" in out + err        # confirmed
    assert "/tmp/" not in out + err and "Traceback" not in err
