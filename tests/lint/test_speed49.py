"""speed49: check_speed's chunk mode (``check_paths`` over lists of files: every file's folder
is a root) does its path work once per folder and per run: the real path of each folder once
(``iter_files``' keys, ``set_roots``), each root once and the project top of a file once a run.
Same keys, same roots, and the cross-file findings are kept (NOTE [trained abroad])."""
from __future__ import annotations

import os
import textwrap

from gradtrace.lint import _real_file, check_paths, iter_files
from gradtrace.lint.analysis import project_files
from gradtrace.lint.analysis.project_files import roots, set_roots
from gradtrace.lint.config import Settings
from tests.lint.tower_net import tower

NET = tower()
TRAIN = '''
import torch
from {module} import Tower

model = Tower()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    {backward}
    opt.step()
'''


def _tree(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("import torch\n")
    (tmp_path / "a" / "y.py").write_text("import torch\n")
    os.symlink(tmp_path / "a", tmp_path / "b")  # a linked folder
    os.symlink(tmp_path / "a" / "x.py", tmp_path / "a" / "link.py")  # a linked file
    return tmp_path


def test_file_keys_are_realpath(tmp_path):
    _tree(tmp_path)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        folders: dict[str, str] = {}
        for p in ("a/x.py", "b/x.py", "b/link.py", "a/link.py", "./a/y.py", "b/../a/y.py",
                  str(tmp_path / "b" / "y.py"), "a//x.py"):
            assert _real_file(p, folders) == os.path.realpath(p), p
        # the same file through a linked folder and a linked file: given once
        assert list(iter_files(["a/x.py", "b/x.py", "a/link.py", "b/y.py"], Settings(),
                               [])) == ["a/x.py", "b/y.py"]
        assert list(iter_files(["a", "b"], Settings(exclude=()), [])) == ["a/link.py", "a/y.py"]
    finally:
        os.chdir(here)


def test_roots_each_folder_once_first_in_order(tmp_path):
    _tree(tmp_path)
    (tmp_path / "c").mkdir()
    a, c = str(tmp_path / "a"), str(tmp_path / "c")
    given = [f"{a}/x.py", str(tmp_path / "c"), str(tmp_path / "b" / "y.py"), f"{a}/y.py", c]
    set_roots(given)
    old = [os.path.realpath(p if os.path.isdir(p) else os.path.dirname(p)) for p in given]
    assert roots() == list(dict.fromkeys(old)) == [os.path.realpath(a), os.path.realpath(c)]
    first = project_files._ROOTS_ID[0]
    set_roots([c])
    assert project_files._ROOTS_ID[0] != first  # other roots: other keys
    set_roots(given)
    assert project_files._ROOTS_ID[0] == first


def _gt115(paths: list[str]) -> list[tuple[str, int]]:
    result = check_paths(paths, Settings(exclude=()))
    return [(os.path.basename(f.path), f.line) for f in result.findings if f.code == "GT115"]


def test_chunk_of_files_keeps_the_model_trained_abroad(tmp_path):
    """Buggy twin: the files given one by one (check_speed's chunks), the model file's
    sibling trains it: GT115 on the cut. Look-alike: the sibling only says the words in a
    comment and a string, no optimizer is built: silent."""
    (tmp_path / "towers.py").write_text(textwrap.dedent(NET))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(
        module="towers", backward="loss.backward()")))
    files = [str(tmp_path / "towers.py"), str(tmp_path / "train.py")]
    assert _gt115(files) == [("towers.py", 15)]
    (tmp_path / "train.py").write_text("# backward compatible\nX = 'optim'\nimport torch\n")
    assert _gt115(files) == []


def test_project_top_found_again_in_a_new_run(tmp_path):
    """A file's project top is kept for one run only: checked alone in its folder first
    (a project of one file: silent), then with the folder above as the root, where a script
    trains it (GT115 on the cut)."""
    sub = tmp_path / "models"
    sub.mkdir()
    (sub / "towers.py").write_text(textwrap.dedent(NET))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(
        module="models.towers", backward="loss.backward()")))
    assert _gt115([str(sub / "towers.py")]) == []
    assert _gt115([str(tmp_path)]) == [("towers.py", 15)]
