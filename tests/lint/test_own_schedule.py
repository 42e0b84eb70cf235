"""GT515 and a scheduler class of the project that sets the rate by its own ``step()``
(NOTE [own schedule]): its order against the optimizer is its design, silent; a builder (in
this file or another of the project) that returns a torch scheduler, or a class of the
project whose ``step()`` steps a torch scheduler, still fires. Each project runs on real
torch: the warning PyTorch gives says which is which."""
from __future__ import annotations

import runpy
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings

OWN = """
    class LRScheduler(object):
        def __init__(self, optimizer, total):
            self.optimizer = optimizer
            self.base = [g["lr"] for g in optimizer.param_groups]
            self.cur, self.total = 0, total

        def step(self):
            for g, lr in zip(self.optimizer.param_groups, self.base):
                g["lr"] = lr * (1 - self.cur / self.total) ** 0.9
            self.cur += 1


    def get_scheduler(optimizer, total):
        lr_scheduler = LRScheduler(optimizer, total)
        return lr_scheduler
    """
WRAPPED = """
    import torch


    class LRScheduler(object):
        def __init__(self, optimizer, total):
            self.inner = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)

        def step(self):
            self.inner.step()


    def get_scheduler(optimizer, total):
        return LRScheduler(optimizer, total)
    """
TORCH = """
    import torch


    def get_scheduler(optimizer, total):
        return torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)
    """
TRAIN = """
    import torch
    from torch import nn
    {imp}


    def train(model, optimizer, lr_scheduler, data):
        for x, y in data:
            lr_scheduler.step()
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    def main():
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        lr_scheduler = get_scheduler(optimizer, 10)
        train(model, optimizer, lr_scheduler, [(torch.randn(8, 4), torch.randn(8, 1))] * 3)


    main()
    """
STEP_LINE = 8  # `lr_scheduler.step()` in TRAIN


def project(root: Path, helpers: str, same_file: bool) -> Path:
    if same_file:
        text = textwrap.dedent(TRAIN).format(imp="").rstrip() + "\n"
        body = textwrap.dedent(helpers)
        main = text.index("\n\ndef train")
        text = text[:main] + "\n\n" + body + text[main:]
        (root / "train.py").write_text(text.lstrip("\n"))
        return root / "train.py"
    (root / "utils").mkdir()
    (root / "utils" / "__init__.py").write_text("")
    (root / "utils" / "lr_helper.py").write_text(textwrap.dedent(helpers).lstrip("\n"))
    (root / "train.py").write_text(textwrap.dedent(TRAIN).format(
        imp="from utils.lr_helper import get_scheduler").lstrip("\n"))
    return root / "train.py"


def gt515(path: Path) -> list[int]:
    found = check_paths([str(path)], Settings()).findings
    return [f.line for f in found if f.code == "GT515"]


def torch_warns(path: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.syspath_prepend(str(path.parent))
    for m in [m for m in sys.modules if m == "utils" or m.startswith("utils.")]:
        monkeypatch.delitem(sys.modules, m)
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            runpy.run_path(str(path), run_name="__main__")
    finally:  # the project's `utils` must not stay imported for the next test
        for m in [m for m in sys.modules if m == "utils" or m.startswith("utils.")]:
            del sys.modules[m]
    return any("lr_scheduler.step()" in str(w.message) for w in got)


def step_line(path: Path) -> int:
    return next(i for i, s in enumerate(path.read_text().splitlines(), 1)
                if s.strip() == "lr_scheduler.step()")


@pytest.mark.parametrize("same_file", [False, True], ids=["other-file", "same-file"])
def test_own_schedule_built_by_a_builder_is_silent(tmp_path: Path, same_file: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = project(tmp_path, OWN, same_file)
    assert gt515(path) == []
    assert not torch_warns(path, monkeypatch)


@pytest.mark.parametrize("helpers", [WRAPPED, TORCH], ids=["wraps-torch", "torch-scheduler"])
@pytest.mark.parametrize("same_file", [False, True], ids=["other-file", "same-file"])
def test_torch_schedule_behind_a_builder_still_fires(tmp_path: Path, helpers: str,
                                                    same_file: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = project(tmp_path, helpers, same_file)
    assert gt515(path) == [step_line(path)]
    if not same_file:
        assert step_line(path) == STEP_LINE
    assert torch_warns(path, monkeypatch)
