"""The Lightning callback on the real Lightning Trainer: values logged, parameters named."""
from __future__ import annotations

import csv
import inspect
import math
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
# Lightning is imported by the first test that needs it, never at collection: every xdist
# worker collects every module, and importing lightning costs each of them ~4 s of CPU.
pytestmark = pytest.mark.skipif(find_spec("lightning") is None,
                                reason="lightning is not installed")
HAS_PTL = find_spec("pytorch_lightning") is not None

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from gradtrace.runtime.trace.tracer import active_tracer  # noqa: E402


def _line(obj: object, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)  # type: ignore[arg-type]
    return start + next(i for i, s in enumerate(lines) if text in s)


@cache
def _lightning() -> None:
    """Imports Lightning and the callback and defines the test modules (module globals), once
    per process, at the first test. Both Lightning packages are imported before the callback
    module: it subclasses both Callbacks."""
    global L, ptl, GradtraceCallback, NoGradientError, Net, WithUnusedHead
    try:
        import pytorch_lightning as ptl
    except ImportError:  # pragma: no cover - the old package is optional
        ptl = None
    import lightning.pytorch as L

    from gradtrace.integrations.lightning import GradtraceCallback, NoGradientError

    class Net(L.LightningModule):
        """An MLP; records what the gradients are at its own on_before_optimizer_step."""

        def __init__(self, cut: bool = False, nan_at: int | None = None) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8))
            self.head = nn.Linear(8, 1)
            self.cut = cut
            self.seen: list[tuple[float, float, dict[str, torch.Tensor]]] = []
            self.after: list[dict[str, torch.Tensor]] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.body(x)
            if self.cut:
                h = h.detach()
            return self.head(h)

        def training_step(self, batch: tuple, i: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.5)

        def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
            grads = [p.grad for p in self.parameters() if p.grad is not None]
            head = [p.grad for p in self.head.parameters()]
            self.seen.append((float(torch.nn.utils.get_total_norm(grads)),
                              float(torch.nn.utils.get_total_norm(head)),
                              {n: p.detach().clone() for n, p in self.head.named_parameters()}))

        def on_train_batch_end(self, outputs: object, batch: object, i: int) -> None:
            self.after.append({n: p.detach().clone() for n, p in self.head.named_parameters()})

    class WithUnusedHead(Net):
        def __init__(self) -> None:
            super().__init__(cut=True)
            self.aux = nn.Linear(8, 2)


@pytest.fixture(autouse=True)
def _lightning_loaded() -> None:
    _lightning()  # the imports and classes above: every test of this module reads them


def _data(n: int = 16, bad_batch: int | None = None) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, 4, generator=g) + 0.1, torch.randn(n, 1, generator=g)
    if bad_batch is not None:
        x[4 * bad_batch] = -1.0  # sqrt(-1) in the forward of that batch
    return DataLoader(TensorDataset(x, y), batch_size=4)


def _fit(module: L.LightningModule, tmp_path: Path, cb: GradtraceCallback, steps: int = 3,
         trainer_cls: type | None = None, data: DataLoader | None = None,
         **kw: object) -> L.Trainer:
    pkg = ptl if trainer_cls is not None and ptl is not None else L
    trainer = (trainer_cls or L.Trainer)(
        max_steps=steps, callbacks=[cb], logger=pkg.loggers.CSVLogger(tmp_path, name="logs"),
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
        default_root_dir=tmp_path, log_every_n_steps=1, accelerator="cpu", devices=1, **kw)
    torch.manual_seed(0)
    trainer.fit(module, data or _data())
    return trainer


def _rows(trainer: L.Trainer) -> dict[int, dict[str, float]]:
    """metrics.csv of the CSVLogger: step -> the gradtrace columns that have a value."""
    path = Path(trainer.loggers[0].log_dir) / "metrics.csv"
    out: dict[int, dict[str, float]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            vals = {k: float(v) for k, v in row.items() if k.startswith("gradtrace/") and v}
            if vals:
                out.setdefault(int(row["step"]), {}).update(vals)
    return out


def test_logged_norms_and_update_ratios_are_those_of_each_step(tmp_path: Path) -> None:
    net = Net()
    # clipping at 0.01 changes every gradient after on_before_optimizer_step
    cb = GradtraceCallback(every=1)
    trainer = _fit(net, tmp_path, cb, gradient_clip_val=0.01)
    assert cb.findings == []  # a correct model: nothing to say
    rows = _rows(trainer)
    assert sorted(rows) == [0, 1, 2]
    for step, (total, head, before) in enumerate(net.seen):
        r = rows[step]
        assert total > 0.01  # the logged norm is the unclipped one
        assert r["gradtrace/grad_norm_total"] == pytest.approx(total, rel=1e-5)
        assert r["gradtrace/grad_norm/head"] == pytest.approx(head, rel=1e-5)
        parts = [r[f"gradtrace/grad_norm/{g}"] for g in ("body.0", "body.2", "head")]
        assert math.sqrt(sum(v * v for v in parts)) == pytest.approx(total, rel=1e-5)
        after = net.after[step]
        upd = math.sqrt(sum(float((after[n] - before[n]).pow(2).sum()) for n in before))
        ref = math.sqrt(sum(float(before[n].pow(2).sum()) for n in before))
        assert r["gradtrace/update_ratio/head"] == pytest.approx(upd / ref, rel=1e-4)
        assert r["gradtrace/nonfinite_grads"] == 0


def test_once_per_optimizer_step_under_accumulation(tmp_path: Path) -> None:
    net = Net()
    cb = GradtraceCallback(every=1, report=False)
    _fit(net, tmp_path, cb, steps=2, accumulate_grad_batches=2)
    assert [s for s, _ in cb.logged] == [0, 1]  # 4 micro-batches, 2 optimizer steps
    assert [m["gradtrace/grad_norm_total"] for _, m in cb.logged] == pytest.approx(
        [total for total, _, _ in net.seen], rel=1e-5)


def test_bf16_autocast_logs_the_gradients_the_optimizer_gets(tmp_path: Path) -> None:
    net = Net()
    cb = GradtraceCallback(every=1, report=False)
    _fit(net, tmp_path, cb, steps=2, precision="bf16-mixed")
    assert [m["gradtrace/grad_norm_total"] for _, m in cb.logged] == pytest.approx(
        [total for total, _, _ in net.seen], rel=1e-5)


def test_cut_and_unused_head_are_named_with_their_lines(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    cb = GradtraceCallback()
    _fit(WithUnusedHead(), tmp_path, cb, steps=4)
    here = str(Path(__file__).name)
    cut = next(f for f in cb.findings if "body.0.weight" in f.message)
    assert cut.path.endswith(here) and cut.line == _line(Net.forward, "h.detach()")
    assert "body.2.bias" in cut.message
    aux = next(f for f in cb.findings if "aux.weight" in f.message)
    assert aux.path.endswith(here) and aux.line == _line(WithUnusedHead.__init__, "self.aux")
    assert "never ran" in aux.message and aux.message.endswith("the first 3 optimizer step(s))")
    assert not any("head." in f.message for f in cb.findings)  # nothing else is blamed
    assert [f.code for f in cb.findings if f.code == "GT850"] == []  # no repeat by the watch
    err = capsys.readouterr().err
    assert err.count("without a gradient in the first 3 optimizer step(s)") == 1
    report = Path(trainer_dir := tmp_path / "logs" / "version_0") / "gradtrace.html"
    assert cb.report_path == report and "aux.weight" in report.read_text()
    assert trainer_dir.is_dir()


def test_fail_fast_raises_at_the_first_step_and_removes_every_hook(tmp_path: Path) -> None:
    from torch.nn.modules import module as mm
    from torch.optim import optimizer as om

    before = (len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks),
              len(om._global_optimizer_pre_hooks), len(om._global_optimizer_post_hooks))
    net = WithUnusedHead()
    with pytest.raises(NoGradientError) as info:
        _fit(net, tmp_path, GradtraceCallback(fail_fast=True, report=False))
    assert net.seen == []  # raised before the first optimizer step
    assert any("aux.weight" in f.message for f in info.value.findings)
    assert active_tracer() is None
    assert before == (len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks),
                      len(om._global_optimizer_pre_hooks), len(om._global_optimizer_post_hooks))
    assert not net._forward_hooks and not net._forward_pre_hooks


def test_first_nonfinite_gradient_is_counted_and_located(tmp_path: Path) -> None:
    class Sqrt(Net):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.body(x.sqrt()))

    cb = GradtraceCallback(every=1, report=False)
    _fit(Sqrt(), tmp_path, cb, steps=3, data=_data(bad_batch=1))
    counts = [m["gradtrace/nonfinite_grads"] for _, m in cb.logged]
    assert counts[0] == 0 and counts[1] > 0
    nan = next(f for f in cb.findings if f.code == "GT851")
    assert "step 1" in nan.message
    assert nan.line == _line(Sqrt.forward, "x.sqrt()")


@pytest.mark.skipif(not HAS_PTL, reason="pytorch_lightning is not installed")
def test_the_older_pytorch_lightning_package(tmp_path: Path) -> None:
    class OldNet(ptl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 1)
            self.unused = nn.Linear(4, 1)

        def training_step(self, batch: tuple, i: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.mse_loss(self.fc(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    cb = GradtraceCallback(every=1)
    assert isinstance(cb, ptl.Callback) and isinstance(cb, L.Callback)
    _fit(OldNet(), tmp_path, cb, steps=2, trainer_cls=ptl.Trainer)
    assert [f.message.split(" never")[0] for f in cb.findings] == ["unused.weight, unused.bias"]
    assert len(cb.logged) == 2 and cb.report_path is not None and cb.report_path.exists()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="every"):
        GradtraceCallback(every=0)
    with pytest.raises(ValueError, match="report"):
        GradtraceCallback(report=3)
