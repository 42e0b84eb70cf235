"""A model under a watch or a trace stays a plain model: torch.save, pickle, deepcopy,
torch.jit.script and torch.compile see nothing of gradtrace (NOTE [nothing on the user's
modules] in gradtrace.runtime.watch.watcher)."""
from __future__ import annotations

import contextlib
import copy
import io
import pickle
from typing import Any, Callable, Iterator

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime.watch.watcher import watch_all


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.criterion = nn.MSELoss()  # a loss module inside the model (Lightning style)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _hooks_on(obj: Any) -> int:
    """How many hooks an object's own dicts hold (modules: every submodule)."""
    if isinstance(obj, nn.Module):
        return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
                   for m in obj.modules())
    return len(obj._optimizer_step_pre_hooks) + len(obj._optimizer_step_post_hooks)


@contextlib.contextmanager
def _watched(kind: str, model: nn.Module, opt: torch.optim.Optimizer) -> Iterator[Any]:
    if kind == "watch":
        with gradtrace.watch(model, opt) as w:
            yield w
    elif kind == "watch-no-optimizer":
        with gradtrace.watch(model) as w:
            yield w
    elif kind == "watch_all":
        with watch_all() as w:
            yield w
    elif kind == "trace":
        with gradtrace.trace() as t:
            yield t
    else:  # a watch inside a trace
        with gradtrace.trace(), gradtrace.watch(model, opt) as w:
            yield w


KINDS = ["watch", "watch-no-optimizer", "watch_all", "trace", "watch-in-trace"]


def _train(model: Net, opt: torch.optim.Optimizer, steps: int = 2) -> None:
    for _ in range(steps):
        opt.zero_grad()
        x = torch.randn(5, 4)
        model.criterion(model(x), x[:, :1]).backward()
        opt.step()


@pytest.fixture
def net() -> tuple[Net, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Net()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _same_weights(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(),
                                                  b.state_dict().values()))


@pytest.mark.parametrize("kind", KINDS)
def test_torch_save_and_load_of_the_whole_model(kind: str, net: Any) -> None:
    model, opt = net
    with _watched(kind, model, opt):
        _train(model, opt)
        buf = io.BytesIO()
        torch.save(model, buf)
        torch.save(opt, io.BytesIO())
        buf.seek(0)
        loaded = torch.load(buf, weights_only=False)
        assert _same_weights(loaded, model)
        _train(model, opt)  # training goes on after the save
    assert _hooks_on(loaded) == 0
    assert not _same_weights(loaded, model)


@pytest.mark.parametrize("kind", KINDS)
def test_torch_save_of_a_model_with_dropout(kind: str) -> None:
    """Dropout layers seen in train mode are watched by the run (GT874) through a global hook,
    never a hook on the layer: pickling failed on that closure."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with _watched(kind, model, opt):
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(5, 4)).pow(2).mean().backward()
            opt.step()
        assert _hooks_on(model) == 0
        buf = io.BytesIO()
        torch.save(model, buf)
        copy.deepcopy(model)
    buf.seek(0)
    assert _hooks_on(torch.load(buf, weights_only=False)) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_pickle_and_deepcopy_carry_nothing_of_ours(kind: str, net: Any) -> None:
    model, opt = net
    with _watched(kind, model, opt):
        _train(model, opt)
        clone = pickle.loads(pickle.dumps(model))
        deep = copy.deepcopy(model)
        deep_opt = copy.deepcopy(opt)
    assert _hooks_on(clone) == 0 and _hooks_on(deep) == 0
    assert _hooks_on(deep_opt) == 0
    assert _same_weights(clone, model) and _same_weights(deep, model)
    for p in deep.parameters():
        assert not p._post_accumulate_grad_hooks


@pytest.mark.parametrize("kind", KINDS)
def test_jit_script_and_compile_while_watched(kind: str, net: Any) -> None:
    model, opt = net
    x = torch.randn(3, 4)
    with _watched(kind, model, opt) as w:
        _train(model, opt)
        with torch.no_grad():
            expected = model(x)
        scripted = torch.jit.script(model)
        compiled = torch.compile(model, backend="eager")
        with torch.no_grad():
            assert torch.equal(scripted(x), expected)
            assert torch.equal(compiled(x), expected)
        opt.zero_grad()
        model.criterion(compiled(x), x[:, :1]).backward()  # a compiled training step
        opt.step()
    if kind != "trace":
        assert w.report.tracks[0].total_steps == 3  # the compiled step was seen too


def test_watched_training_is_bitwise_the_same(net: Any) -> None:
    model, opt = net
    twin = copy.deepcopy(model)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    torch.manual_seed(1)
    _train(twin, twin_opt, 4)
    torch.manual_seed(1)
    with gradtrace.watch(model, opt) as w:
        _train(model, opt, 4)
    assert _same_weights(model, twin)
    track = w.report.tracks[0]
    assert track.total_steps == 4
    assert all(s.loss is not None and s.loss > 0 for s in track.steps)  # the inner MSELoss


def test_every_hook_is_gone_after_the_watch(net: Any) -> None:
    model, opt = net
    globals_before = (len(torch.nn.modules.module._global_forward_hooks),
                      len(torch.nn.modules.module._global_forward_pre_hooks))
    with gradtrace.watch(model, opt):
        assert len(torch.nn.modules.module._global_forward_hooks) == globals_before[0] + 1
        _train(model, opt)
    assert (len(torch.nn.modules.module._global_forward_hooks),
            len(torch.nn.modules.module._global_forward_pre_hooks)) == globals_before
    assert _hooks_on(model) == 0 and _hooks_on(opt) == 0


def test_run_report_survives_a_script_that_saves_the_model(
        cli_inproc: Callable[..., Any]) -> None:
    """pytorch/examples' word_language_model saves the whole model each epoch (with a dropout
    layer: the run once hooked each one it watched, and pickling failed on that closure). In this
    process (the run's entry point has its own subprocess test: tests/watch/test_run_report.py)."""
    cli_inproc.write("train.py", """
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.MSELoss()
for epoch in range(2):
    opt.zero_grad()
    crit(model(torch.randn(6, 4)), torch.zeros(6, 1)).backward()
    opt.step()
    with open("model.pt", "wb") as f:
        torch.save(model, f)
print("saved", sum(len(m._forward_hooks) for m in torch.load("model.pt", weights_only=False).modules()))
""")
    proc = cli_inproc("run", "--report", "out.html", "train.py")
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"saved 0" in proc.stdout
    assert "2 steps" in (cli_inproc.cwd / "out.html").read_text(encoding="utf-8")
