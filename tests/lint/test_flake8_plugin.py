"""The flake8 plugin, through real flake8 in a subprocess: same findings, flake8 columns."""
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


def test_noqa_and_other_selections(tmp_path):
    out = flake8(tmp_path, "--select=F").stdout
    assert "F401" in out and "GT" not in out
    assert "GT101" in flake8(tmp_path, "--select=F", "--extend-select=GT1").stdout
    assert "GT101" in flake8(tmp_path).stdout  # default selection includes plugin codes
    (tmp_path / "t.py").write_text(SRC.replace("backward()", "backward()  # noqa: GT101"))
    r = subprocess.run([sys.executable, "-m", "flake8", "--select=GT", "t.py"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.stdout == ""


def test_plugin_does_no_work_when_gt_is_not_selected(tmp_path):
    from flake8.main.application import Application

    from gradtrace.lint.flake8 import Plugin

    (tmp_path / "t.py").write_text(SRC)
    for argv, enabled in ((["--select=F"], False), (["--select=F", "--extend-select=GT1"], True),
                          (["--select=G"], True), ([], True)):
        Application().initialize([*argv, str(tmp_path / "t.py")])
        assert Plugin.enabled is enabled, argv
