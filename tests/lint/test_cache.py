"""The check cache (gradtrace.lint.cache): same findings warm and cold, edits re-checked,
bad caches ignored, options, --jobs, concurrent runs, bounds. The real CLI, in process."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gradtrace.lint as lint
from gradtrace import env
from gradtrace.cli import main
from gradtrace.lint import cache as cache_mod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BUG = "import torch\nloss = torch.nn.functional.mse_loss(model(x), y)\nloss.item().backward()\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project (the bundled examples) as the current folder, its cache in the default place."""
    shutil.copytree(EXAMPLES, tmp_path / "examples",
                    ignore=shutil.ignore_patterns("runtime", "integrations"))
    (tmp_path / "notorch.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(env.CACHE_DIR, raising=False)
    monkeypatch.delenv(env.NO_CACHE, raising=False)
    return tmp_path


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths whose bytes were really checked (not answered from the cache)."""
    seen: list[str] = []
    real = lint.check_bytes

    def spy(path, *args, **kwargs):
        seen.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(lint, "check_bytes", spy)
    return seen


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    rc = main(["check", "--jobs", "1", "--format", "json", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def packs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*/*.json"))


def test_warm_run_answers_from_cache_with_the_same_findings(tree, parsed, capsys):
    cold = run(capsys, ".")
    n_checked = len(parsed)
    assert cold[0] == 1 and n_checked == 6 and "notorch.py" not in parsed
    assert len(json.loads(cold[1])["findings"]) >= 5
    folder = tree / ".gradtrace_cache"
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (folder / "CACHEDIR.TAG").is_file()
    doc = json.loads(packs(folder)[0].read_text())
    assert len(doc["entries"]) == n_checked
    parsed.clear()
    assert run(capsys, ".") == cold           # same exit code, same JSON (fixes, related...)
    assert parsed == []
    # the text format with its source excerpts, and --fix --diff, work from the cache too
    main(["check", "--jobs", "1", "--no-cache", "."])
    fresh = capsys.readouterr().out
    main(["check", "--jobs", "1", "."])
    assert capsys.readouterr().out == fresh and "^" in fresh
    main(["check", "--jobs", "1", "--diff", "--unsafe-fixes", "--no-cache", "."])
    diff = capsys.readouterr().out
    main(["check", "--jobs", "1", "--diff", "--unsafe-fixes", "."])
    assert capsys.readouterr().out == diff and diff.startswith("---")


def test_edited_file_is_checked_afresh(tree, parsed, capsys):
    run(capsys, ".")
    target = tree / "examples" / "correct_training.py"
    target.write_text(target.read_text() + "\n" + BUG.replace("import torch\n", ""))
    parsed.clear()
    rc, out, _ = run(capsys, ".")
    assert parsed == ["correct_training.py"]
    lines = [f["line"] for f in json.loads(out)["findings"]
             if f["path"].endswith("correct_training.py")]
    n = len(target.read_text().splitlines())
    assert lines == [n] and rc == 1           # the new bug, on the new last line


def test_settings_and_paths_key_the_cache(tree, parsed, capsys):
    full = run(capsys, ".")
    parsed.clear()
    rc, out, _ = run(capsys, ".", "--select", "GT5")
    assert parsed and all(f["code"].startswith("GT5") for f in json.loads(out)["findings"])
    parsed.clear()
    assert run(capsys, ".") == full and parsed == []
    # another spelling of the same files is answered, and reported under that spelling
    rc, out, _ = run(capsys, "./examples/training_loop.py")
    assert parsed == [] and rc == 1
    assert {f["path"] for f in json.loads(out)["findings"]} == {"./examples/training_loop.py"}


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "bad-entry"])
def test_corrupt_or_foreign_cache_is_ignored_and_rewritten(tree, parsed, capsys, damage):
    cold = run(capsys, ".")
    pack = packs(tree / ".gradtrace_cache")[0]
    doc = json.loads(pack.read_text())
    if damage == "garbage":
        pack.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        pack.write_text(pack.read_text()[: len(pack.read_text()) // 2])
    elif damage == "foreign":
        pack.write_text(json.dumps({**doc, "key": "0" * 40}))
    else:
        for entry in doc["entries"].values():
            entry[2] = [["GT101", 3]] if entry[2] else 7
        pack.write_text(json.dumps(doc))
    parsed.clear()
    assert run(capsys, ".") == cold
    assert len(parsed) == 6 if damage != "bad-entry" else parsed
    parsed.clear()
    assert run(capsys, ".") == cold and parsed == []   # rewritten whole


def test_cache_stays_out_of_git_status_as_under_pre_commit(tree, capsys):
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True,
                              check=True).stdout

    git("init", "-q")
    git("add", "-A")
    before = git("status", "--porcelain", "--ignored=no")
    main(["check", "--jobs", "1", "-q", "examples/training_loop.py", "examples/manual_sgd.py"])
    capsys.readouterr()
    assert (tree / ".gradtrace_cache" / ".gitignore").is_file()
    assert git("status", "--porcelain", "--ignored=no") == before


def test_no_cache_and_cache_dir_options(tree, parsed, capsys, monkeypatch):
    cold = run(capsys, ".", "--no-cache")
    monkeypatch.setenv(env.NO_CACHE, "1")
    assert run(capsys, ".") == cold
    assert not (tree / ".gradtrace_cache").exists()
    monkeypatch.delenv(env.NO_CACHE)
    assert run(capsys, ".", "--cache-dir", "elsewhere") == cold
    assert packs(tree / "elsewhere") and not (tree / ".gradtrace_cache").exists()
    monkeypatch.setenv(env.CACHE_DIR, str(tree / "fromenv"))
    assert run(capsys, ".") == cold
    assert packs(tree / "fromenv") and not (tree / ".gradtrace_cache").exists()
    parsed.clear()
    assert run(capsys, ".", "--cache-dir", "elsewhere") == cold and parsed == []


def test_cache_lives_in_the_project_root(tree, capsys, monkeypatch):
    (tree / "pyproject.toml").write_text('[tool.gradtrace]\nignore = ["GT7"]\n')
    monkeypatch.chdir(tree / "examples")
    assert run(capsys, "training_loop.py")[0] == 1
    assert packs(tree / ".gradtrace_cache")
    assert not (tree / "examples" / ".gradtrace_cache").exists()


def test_unwritable_cache_is_a_warning_only(tree, capsys):
    (tree / "afile").write_text("")
    rc, out, err = run(capsys, ".", "--cache-dir", "afile/sub")
    assert rc == 1 and json.loads(out)["findings"]
    assert err.startswith("gradtrace: warning: cannot write the cache")


def test_jobs_answers_hits_in_the_main_process(tree, parsed, capsys):
    for i in range(10):  # enough files for the process pool
        (tree / f"bug{i}.py").write_text(BUG)
    cold = run(capsys, ".", "--no-cache")
    assert run(capsys, ".", "--jobs", "2") == cold     # workers return the new entries
    assert len(json.loads(packs(tree / ".gradtrace_cache")[0].read_text())["entries"]) == 16
    parsed.clear()
    (tree / "bug3.py").write_text(BUG.replace("loss.item()", "loss.item( )"))
    rc, out, err = run(capsys, ".", "--jobs", "2")
    assert parsed == ["bug3.py"] and rc == 1   # hits answered first; one file left: no pool
    assert len(json.loads(out)["findings"]) == len(json.loads(cold[1])["findings"])
    assert len(json.loads(packs(tree / ".gradtrace_cache")[0].read_text())["entries"]) == 16


def test_concurrent_runs_agree_and_leave_a_whole_cache(tree):
    for i in range(10):
        (tree / f"bug{i}.py").write_text(BUG)
    cmd = [sys.executable, "-m", "gradtrace", "check", "--format", "json", "."]
    procs = [subprocess.Popen(cmd + (["--jobs", "2"] if i else ["--jobs", "1"]), cwd=tree,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(r == results[0] for r in results) and results[0][2] == 1 and not results[0][1]
    doc = json.loads(packs(tree / ".gradtrace_cache")[0].read_text())
    assert len(doc["entries"]) == 16
    assert not list((tree / ".gradtrace_cache").glob("*/.tmp-*"))


def test_cache_is_bounded(tree, capsys, monkeypatch):
    monkeypatch.setattr(cache_mod, "MAX_ENTRIES", 4)
    monkeypatch.setattr(cache_mod, "MAX_PACKS", 2)
    for sel in ("GT1", "GT2", "GT5", "GT"):
        run(capsys, ".", "--select", sel)
    found = packs(tree / ".gradtrace_cache")
    assert len(found) == 2
    assert all(len(json.loads(p.read_text())["entries"]) == 4 for p in found)
    pack = max(found, key=lambda p: p.stat().st_mtime_ns)  # the --select GT one
    doc = json.loads(pack.read_text())
    for entry in doc["entries"].values():
        entry[1] -= cache_mod.MAX_AGE_DAYS + 1            # unused for too long
    pack.write_text(json.dumps(doc))
    target = tree / "examples" / "training_loop.py"
    target.write_text(target.read_text() + "# edited\n")
    run(capsys, str(target), "--select", "GT")
    assert list(json.loads(pack.read_text())["entries"]) == [str(target)]


def test_rule_crash_is_reported_again_on_a_warm_run(tree, capsys, monkeypatch):
    from gradtrace.lint.registry import select_rules

    monkeypatch.delenv("GRADTRACE_STRICT", raising=False)
    rule = next(r for r in select_rules() if r.code == "GT101")

    def boom(self, node, ctx):
        raise RuntimeError("boom")

    monkeypatch.setattr(rule, "visit_Call", boom, raising=False)
    (tree / "bug.py").write_text(BUG)
    first = run(capsys, "bug.py", "--select", "GT101")
    assert run(capsys, "bug.py", "--select", "GT101") == first
    assert "boom" in first[1] + first[2]
