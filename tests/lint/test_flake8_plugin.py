"""The flake8 plugin, through real flake8: same findings, flake8 columns. One run is a real
`python -m flake8` subprocess (the entry point); the others call flake8's own `main` in this
process (the same application, without a fresh interpreter: ~0.4 s of CPU each)."""
from __future__ import annotations

import subprocess
import sys

SRC = "import torch\nloss = f(x)\nif loss:\n    loss.item().backward()\n"


def flake8(tmp_path, *args):
    (tmp_path / "t.py").write_text(SRC)
    return subprocess.run([sys.executable, "-m", "flake8", *args, "t.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_findings_with_flake8_columns(tmp_path):
    r = flake8(tmp_path, "--select=GT101")
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("t.py:4:5: GT101 `loss.item()`")
    assert r.returncode == 1
    import os  # flake8 never reads or writes gradtrace's check cache

    assert not (tmp_path / ".gradtrace_cache").exists()
    assert not os.path.exists(os.environ["GRADTRACE_CACHE_DIR"])


def flake8_inproc(tmp_path, capsys, monkeypatch, *args) -> str:
    """flake8's stdout for ``flake8 ARGS t.py`` run by ``flake8.main.cli.main`` in tmp_path."""
    from flake8.main.cli import main

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    main([*args, "t.py"])
    return capsys.readouterr().out


def test_noqa_and_other_selections(tmp_path, capsys, monkeypatch):
    (tmp_path / "t.py").write_text(SRC)
    out = flake8_inproc(tmp_path, capsys, monkeypatch, "--select=F")
    assert "F401" in out and "GT" not in out
    assert "GT101" in flake8_inproc(tmp_path, capsys, monkeypatch, "--select=F",
                                    "--extend-select=GT1")
    # default selection includes plugin codes
    assert "GT101" in flake8_inproc(tmp_path, capsys, monkeypatch)
    (tmp_path / "t.py").write_text(SRC.replace("backward()", "backward()  # noqa: GT101"))
    assert flake8_inproc(tmp_path, capsys, monkeypatch, "--select=GT") == ""


def test_plugin_does_no_work_when_gt_is_not_selected(tmp_path):
    from flake8.main.application import Application

    from gradtrace.lint.flake8 import Plugin

    (tmp_path / "t.py").write_text(SRC)
    for argv, enabled in ((["--select=F"], False), (["--select=F", "--extend-select=GT1"], True),
                          (["--select=G"], True), ([], True)):
        Application().initialize([*argv, str(tmp_path / "t.py")])
        assert Plugin.enabled is enabled, argv
