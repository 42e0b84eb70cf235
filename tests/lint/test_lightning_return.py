"""GT530: a LightningModule's training_step that never returns its loss, on real Lightning: the
buggy twins (other spellings than the rule's examples) are reported on their line and never
move the weights; the look-alikes are silent and train."""
from __future__ import annotations

import textwrap
from importlib.util import find_spec

import pytest

from gradtrace.lint import check_source

pytest.importorskip("torch")
# find_spec, not an import: the snippets import lightning when they run; an import here would
# cost every xdist worker ~4 s of CPU at collection
# the "frameworks" xdist group (tests/conftest.py _SHARED_SETUP): lightning (with transformers
# and scipy, ~4 s of CPU) is imported by the worker that runs tests/integrations' Lightning tests
pytestmark = [pytest.mark.skipif(find_spec("lightning") is None,
                                 reason="lightning is not installed"),
              pytest.mark.xdist_group("frameworks")]

HEAD = """
import torch
import torch.nn as nn
import lightning as L
from torch.utils.data import DataLoader, TensorDataset
"""
RUN = """
torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = Regressor()
before = [p.detach().clone() for p in model.parameters()]
trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False,
                    default_root_dir=ROOT)
trainer.fit(model, data)
moved = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
"""

BUGGY = {
    # the loss kept on self and logged, the step itself returns nothing
    "kept-on-self": ("""
class Base(L.LightningModule):
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

class Regressor(Base):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.last_loss = nn.functional.mse_loss(self.net(x), y)
        if batch_idx % 2 == 0:
            self.log("mse", self.last_loss)
""", 19),
    # a bare `return` after logging a dict of metrics
    "bare-return": ("""
class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.crit = nn.MSELoss()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.crit(self.net(x), y)
        self.log_dict({"loss": loss, "step": float(batch_idx)})
        return

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.1)
""", 17),
}

GOOD = {
    "dict-with-loss": """
class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("mse", loss)
        return {"loss": loss}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
""",
    "manual-optimization": """
class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
""",
}


def _codes(src: str) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in check_source(src, "t.py") if f.code == "GT530"]


def _moved(src: str, tmp_path) -> bool:  # type: ignore[no-untyped-def]
    ns: dict = {"ROOT": str(tmp_path)}
    exec(compile(src + RUN, "t.py", "exec"), ns)
    return ns["moved"]


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_twin_reported_and_never_trains(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    body, line = BUGGY[name]
    src = HEAD + textwrap.dedent(body)
    assert _codes(src) == [(line, "GT530")]
    assert not _moved(src, tmp_path)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_look_alike_silent_and_trains(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = HEAD + textwrap.dedent(GOOD[name])
    assert _codes(src) == []
    assert _moved(src, tmp_path)
