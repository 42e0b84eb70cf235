"""Why each DDP parameter got no gradient, in-process on a 1-process gloo group (the DDP
reducer raises the same error as with 2 ranks; the rank session tracks per-iteration usage)."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import reason_models as rm  # noqa: E402
from dist_helpers import free_port  # noqa: E402

HERE = Path(rm.__file__)


def line_of(marker: str) -> int:
    lines = HERE.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"# <- {marker}" in text)


@pytest.fixture(scope="module")
def group():
    port = free_port()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def diagnose(model_cls, monkeypatch, tmp_path, steps: int = 3, after_wrap=None, **ddp_kw):
    import gradtrace
    from gradtrace.runtime.distributed.info import RankInfo
    from gradtrace.runtime.distributed.ranks import rank_session
    from torch.nn.parallel import DistributedDataParallel as DDP

    monkeypatch.setenv("GRADTRACE_DDP_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = DDP(model_cls(), **ddp_kw)  # <- wrapped
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradtrace.trace() as tr, rank_session(tr, info=RankInfo(0, 2, 0)) as rs:
        try:
            if after_wrap is not None:
                after_wrap(model)
            for step in range(steps):
                opt.zero_grad()
                rm.loss_of(model(torch.randn(5, 4), step)).backward()
                opt.step()
        except RuntimeError as e:
            return rs.diagnose(e)
    return None


def wrapped_line() -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if "# <- wrapped" in text)


@pytest.mark.parametrize("cls, names, marker, words", [
    (rm.Detached, "body.weight, body.bias", "cut", "graph was cut here: `detach`"),
    # a module that ran but is not on the loss's path (every iteration, or in some only): the
    # wrapper that assumes every parameter is used leads, the module's line is related
    (rm.TwoOutputs, "aux.weight, aux.bias", None, "output did not reach the loss"),
    (rm.StepBranch, "aux.weight, aux.bias", None, "did not run in that iteration"),
    (rm.NoGradAux, "aux.weight, aux.bias", "no grad", "only ran with grad mode off"),
])
def test_reason(group, monkeypatch, tmp_path, cls, names, marker, words):
    found = diagnose(cls, monkeypatch, tmp_path)
    assert found is not None and [f.code for f in found] == ["GT880"], found
    f = found[0]
    assert names in f.message and words in f.message, f.message
    if marker:
        assert f.line == line_of(marker)
    else:
        assert (Path(f.path).name, f.line) == (Path(__file__).name, wrapped_line()), f
        assert "without find_unused_parameters=True" in f.message
    if cls is rm.TwoOutputs:
        assert f.related[0].line == line_of("aux call")
    if cls is rm.StepBranch:
        assert "iteration 2" in f.message
        assert [r.line for r in f.related[:2]] == [rm.StepBranch.__init__.__code__.co_firstlineno
                                                   + 2, line_of("step branch")]


def test_used_model_raises_nothing(group, monkeypatch, tmp_path):
    assert diagnose(rm.Used, monkeypatch, tmp_path) is None


@pytest.mark.parametrize("cls", [rm.TwoOutputs, rm.StepBranch])
def test_unused_by_design_with_find_unused_trains_silently(group, monkeypatch, tmp_path, cls):
    # the same models wrapped as they need: no error, so no GT880
    assert diagnose(cls, monkeypatch, tmp_path, find_unused_parameters=True) is None


def test_frozen_after_wrapping_names_the_frozen_layer(group, monkeypatch, tmp_path):
    found = diagnose(rm.Used, monkeypatch, tmp_path, after_wrap=rm.freeze_body)
    assert found is not None and [f.code for f in found] == ["GT880"], found
    f = found[0]
    # DDP's indices 0 1 are body.weight/bias: counted back in although frozen now
    assert "body.weight, body.bias" in f.message and "head" not in f.message, f.message
    assert "frozen (requires_grad=False) here after DistributedDataParallel" in f.message
    assert f.line == line_of("frozen after wrap")
    assert f.fix is not None and "before wrapping" in f.fix.title


def _train(traced: bool, monkeypatch, tmp_path) -> list[bytes]:
    import gradtrace
    from gradtrace.runtime.distributed.info import RankInfo
    from gradtrace.runtime.distributed.ranks import rank_session
    from torch.nn.parallel import DistributedDataParallel as DDP

    monkeypatch.setenv("GRADTRACE_DDP_DIR", str(tmp_path))
    torch.manual_seed(3)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(4)
    with contextlib.ExitStack() as stack:
        if traced:
            tr = stack.enter_context(gradtrace.trace())
            rs = stack.enter_context(rank_session(tr, check_sync=1, info=RankInfo(0, 2, 0)))
        for _ in range(10):
            opt.zero_grad()
            model(torch.randn(8, 6, generator=gen)).pow(2).mean().backward()
            opt.step()
    if traced:
        assert rs.progress.steps == 10 and rs.sync_facts == []  # checked, nothing differs
        assert rs._sync is not None and not rs._sync.disabled and rs._sync.count == 4
    return [p.detach().numpy().tobytes() for p in model.parameters()]


def test_training_bits_unchanged_with_session_and_sync_check(group, monkeypatch, tmp_path):
    assert _train(False, monkeypatch, tmp_path) == _train(True, monkeypatch, tmp_path)
