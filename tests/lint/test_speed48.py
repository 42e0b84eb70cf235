"""speed48: GT115's model files (NOTE [trained abroad]) look for a file of the project that may
train them (its bytes hold `backward` and `optim`) before looking for each module class's
cuts in `forward`; the finding is kept where such a file trains the class."""
from __future__ import annotations

import ast
import os
import textwrap

from gradtrace.lint import check_paths
from gradtrace.lint.analysis.project_files import set_roots
from gradtrace.lint.analysis.trained_abroad import trainer_abroad
from gradtrace.lint.cache import FileCache
from gradtrace.lint.config import Settings
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports
from tests.lint.tower_net import tower

NET = tower()
TRAIN = '''
import torch
from towers import Tower
{helper}
model = Tower()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    {backward}
    opt.step()
'''
SPLIT = '''
def learn(loss):
    loss.backward()
'''


def _write(tmp_path, split: bool) -> None:
    (tmp_path / "towers.py").write_text(textwrap.dedent(NET))
    # a sibling whose words are only in comments and strings trains nothing
    (tmp_path / "layers.py").write_text("# backward compatible names\nX = 'optimized'\n")
    train = TRAIN.format(helper="from steps import learn" if split else "",
                         backward="learn(loss)" if split else "loss.backward()")
    (tmp_path / "train.py").write_text(textwrap.dedent(train))
    if split:  # the backward in a helper file that builds no optimizer
        (tmp_path / "steps.py").write_text(textwrap.dedent(SPLIT))


def _gt115(tmp_path, cache: FileCache | None = None) -> list[int]:
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = check_paths(["towers.py"], Settings(exclude=()), cache=cache)
    finally:
        os.chdir(here)
    if cache is not None:
        cache.save(result.cache_entries)
    return sorted(f.line for f in result.findings if f.code == "GT115")


def _trainer(tmp_path) -> bool:
    path = str(tmp_path / "towers.py")
    text = (tmp_path / "towers.py").read_text()
    set_roots([str(tmp_path)])
    return trainer_abroad(Context(path, text, ast.parse(text), Imports(), text))


def test_buggy_twin_model_file_trained_by_a_script_is_reported(tmp_path):
    _write(tmp_path, split=False)
    assert _trainer(tmp_path)
    assert _gt115(tmp_path) == [15]


def test_look_alike_no_file_holds_both_backward_and_optim(tmp_path):
    _write(tmp_path, split=True)  # train.py: the optimizer; steps.py: the backward
    assert not _trainer(tmp_path)
    assert _gt115(tmp_path) == []


def test_look_alike_words_only_in_comments_and_strings(tmp_path):
    (tmp_path / "towers.py").write_text(textwrap.dedent(NET))
    (tmp_path / "layers.py").write_text("# backward compatible names\nX = 'optimized'\n")
    assert not _trainer(tmp_path)
    assert _gt115(tmp_path) == []


def test_cached_model_file_checked_again_when_a_training_script_appears(tmp_path):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    src = tmp_path / "proj"
    src.mkdir()
    (src / "towers.py").write_text(textwrap.dedent(NET))
    (src / "notes.py").write_text("print('other file')\n")
    settings = Settings(exclude=())
    assert _gt115(src, FileCache.open(settings, str(cache_dir))) == []
    (src / "train.py").write_text(textwrap.dedent(TRAIN.format(helper="",
                                                               backward="loss.backward()")))
    assert _gt115(src, FileCache.open(settings, str(cache_dir))) == [15]
