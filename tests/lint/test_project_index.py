"""The project index (gradtrace.lint.analysis.project, NOTE [project index]): facts of a
function of another file of the checkout, read through the file's imports. Each case is a
small project in tmp_path; the buggy ones run on real torch to show the claim."""
from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.cli import main
from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings

CUTTING = """
    import torch
    import torch.nn.functional as F


    def compute_loss(out, y):
        return torch.tensor(F.mse_loss(out, y).item(), requires_grad=True)
    """
CORRECT = """
    import torch.nn.functional as F


    def compute_loss(out, y):
        return F.mse_loss(out, y)
    """
TRAIN = """
    import torch
    from torch import nn
    {imp}

    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = {call}(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert model.weight.grad is not None and model.weight.grad.abs().sum() > 0, "no gradient"
    """
LOSS_LINE = 8  # the `loss = ...` line of TRAIN


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def findings(*paths: Path):
    return check_paths([str(p) for p in paths], Settings()).findings


def runs(root: Path, script: str) -> str | None:
    """Run ``script`` of the project on real torch: None, or the error it ends with."""
    pytest.importorskip("torch")
    names = ("utils", "helpers", "helpers.losses", "models", "commons", "pkg", "pkg.utils")
    for m in names:  # another test's project may have left a module of the same name
        sys.modules.pop(m, None)
    sys.path.insert(0, str(root))
    try:
        runpy.run_path(str(root / script), run_name="__main__")
    except (AssertionError, RuntimeError) as exc:
        return str(exc)
    finally:
        sys.path.remove(str(root))
        for m in names:
            sys.modules.pop(m, None)
    return None


def test_cutting_helper_of_another_file_is_found_at_the_call(tmp_path):
    root = write(tmp_path, {"utils.py": CUTTING, "train.py": TRAIN.format(
        imp="from utils import compute_loss", call="compute_loss")})
    got = findings(root)
    assert [(f.code, Path(f.path).name, f.line) for f in got] == [("GT102", "train.py", LOSS_LINE)]
    assert any(Path(r.path).name == "utils.py" and r.line == 6 for r in got[0].related)
    assert "F.mse_loss(out, y).item()" in got[0].message
    assert runs(root, "train.py") == "no gradient"  # the helper's forced leaf trains nothing


def test_correct_helper_of_another_file_stays_silent(tmp_path):
    root = write(tmp_path, {"utils.py": CORRECT, "train.py": TRAIN.format(
        imp="from utils import compute_loss", call="compute_loss")})
    assert findings(root) == []
    assert runs(root, "train.py") is None


def test_helper_through_an_imported_module(tmp_path):
    root = write(tmp_path, {"utils.py": CUTTING, "train.py": TRAIN.format(
        imp="import utils as u", call="u.compute_loss")})
    assert [(f.code, f.line) for f in findings(root)] == [("GT102", LOSS_LINE)]


def test_relative_import_from_the_package(tmp_path):
    root = write(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": CUTTING,
                            "pkg/train.py": TRAIN.format(imp="from .utils import compute_loss",
                                                         call="compute_loss")})
    got = findings(root / "pkg" / "train.py")  # one file given: its package is read
    assert [(f.code, f.line) for f in got] == [("GT102", LOSS_LINE)]


def test_package_init_re_export(tmp_path):
    root = write(tmp_path, {"helpers/__init__.py": "from .losses import compute_loss\n",
                            "helpers/losses.py": CUTTING,
                            "train.py": TRAIN.format(imp="from helpers import compute_loss",
                                                     call="compute_loss")})
    got = findings(root)
    assert [(f.code, Path(f.path).name, f.line) for f in got] == [("GT102", "train.py", LOSS_LINE)]
    assert any(Path(r.path).name == "losses.py" for r in got[0].related)


def test_src_layout(tmp_path):
    root = write(tmp_path, {"src/utils.py": CUTTING, "train.py": TRAIN.format(
        imp="from utils import compute_loss", call="compute_loss")})
    assert [(f.code, f.line) for f in findings(root / "train.py")] == [("GT102", LOSS_LINE)]



def test_a_full_index_keeps_the_file_it_just_loaded(tmp_path, monkeypatch):
    """When the index is full, a file just loaded is the most recently used: the oldest
    goes, not the new one (its facts would be lost at once: a long run then disagreed with a
    short run of the same files)."""
    from gradtrace.lint.analysis import project_files as pf
    monkeypatch.setattr(pf, "MAXFILES", 2)
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.py").write_text(f"def {name}():\n    return 1\n")
    for name in ("a", "b", "c"):
        got = pf._load(str(tmp_path / f"{name}.py"), 1)
        assert got is not None
        if name != "c":
            pf.use(got)  # a and b were read by a checked file; c is only loaded
    kept = {Path(p).name for p, f in pf.FILES.items()
            if f is not None and Path(p).parent == tmp_path}
    assert kept == {"b.py", "c.py"}
    root = write(tmp_path / "proj", {"helpers/__init__.py": "from .losses import compute_loss\n",
                                     "helpers/losses.py": CUTTING,
                                     "train.py": TRAIN.format(imp="from helpers import compute_loss",
                                                              call="compute_loss")})
    assert [(f.code, f.line) for f in findings(root)] == [("GT102", LOSS_LINE)]

@pytest.mark.parametrize("sibling", [None, "def compute_loss(out, y:\n    return out\n",
                                     b"\xff\xfe not text \x00"])
def test_missing_or_unparsable_sibling_gives_no_fact_and_no_error(tmp_path, sibling):
    files = {"train.py": TRAIN.format(imp="from utils import compute_loss",
                                      call="compute_loss")}
    root = write(tmp_path, files)
    if isinstance(sibling, bytes):
        (root / "utils.py").write_bytes(sibling)
    elif sibling is not None:
        (root / "utils.py").write_text(sibling)
    got = check_paths([str(root / "train.py")], Settings())
    assert got.findings == [] and got.rule_errors == []


def test_site_packages_and_torch_are_never_read(tmp_path):
    root = write(tmp_path, {"venv/lib/site-packages/utils.py": CUTTING,
                            "torch/nn/functional.py": CUTTING,
                            "train.py": TRAIN.format(imp="from utils import compute_loss",
                                                     call="compute_loss")})
    assert findings(root / "train.py") == []


GENERATOR = """
    import torch
    from torch import nn


    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Conv1d(1, 1, 3, padding=1)

        def forward(self, z):
            h = self.net(z)
            ids_slice = {ids}
            return h[:, :, :8], ids_slice
    """
COMMONS = """
    import torch


    def slice_segments(x, ids_str, segment_size=4):
        ret = torch.zeros_like(x[:, :, :segment_size])
        for i in range(x.size(0)):
            idx_str = ids_str[i]
            ret[i] = x[i, :, idx_str:idx_str + segment_size]
        return ret
    """
VITS = """
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    import commons
    from models import Generator

    net_g = Generator()
    if torch.distributed.is_initialized():
        net_g = DDP(net_g)
    net_d = nn.Conv1d(1, 1, 3)
    optim_g = torch.optim.AdamW(net_g.parameters())
    optim_d = torch.optim.AdamW(net_d.parameters())
    for z, y in [(torch.randn(2, 1, 32), torch.randn(2, 1, 32))]:
        y_hat, ids_slice = net_g(z)
        y = {use}
        loss_disc = (net_d(y) - 1).pow(2).mean() + net_d(y_hat.detach()).pow(2).mean()
        optim_d.zero_grad()
        loss_disc.backward()
        optim_d.step()
        loss_gen = (net_d(y_hat) - 1).pow(2).mean() + (y - y_hat).abs().mean()
        optim_g.zero_grad()
        loss_gen.backward()
        optim_g.step()
    """


def test_vits_loop_with_integer_slice_starts_of_another_file_is_silent(tmp_path):
    """VITS's loop: the generator (another file) returns integer slice starts beside its
    output; the waveform sliced with them has no graph, the discriminator's backward frees
    nothing the generator loss reads."""
    root = write(tmp_path, {
        "models.py": GENERATOR.format(ids="(torch.rand([z.size(0)]) * (z.size(-1) - 8)).long()"),
        "commons.py": COMMONS,
        "train.py": VITS.format(use="commons.slice_segments(y, ids_slice, 8)")})
    assert findings(root) == []
    assert runs(root, "train.py") is None


def test_vits_twin_a_graph_of_the_generator_in_the_target_is_reported(tmp_path):
    """The twin: the second element is a layer output (a graph), added into the target."""
    root = write(tmp_path, {"models.py": GENERATOR.format(ids="self.net(z)[:, :, :8]"),
                            "commons.py": COMMONS,
                            "train.py": VITS.format(use="y[:, :, :8] + ids_slice")})
    assert [f.code for f in findings(root)] == ["GT509"]
    assert "backward through the graph a second time" in (runs(root, "train.py") or "")


def test_cache_answer_changes_when_the_helper_file_is_edited(tmp_path, monkeypatch, capsys):
    root = write(tmp_path, {"utils.py": CUTTING, "train.py": TRAIN.format(
        imp="from utils import compute_loss", call="compute_loss")})
    monkeypatch.chdir(root)
    monkeypatch.delenv("GRADTRACE_NO_CACHE", raising=False)
    monkeypatch.delenv("GRADTRACE_CACHE_DIR", raising=False)

    def codes() -> list[str]:
        main(["check", "--jobs", "1", "--format", "json", "--exit-zero", "."])
        out = capsys.readouterr().out
        return [c for c in ("GT102",) if c in out]

    assert codes() == ["GT102"]
    assert codes() == ["GT102"]  # answered from the cache
    (root / "utils.py").write_text(textwrap.dedent(CORRECT).lstrip("\n"))
    assert codes() == []  # the helper's file changed: train.py is checked again
    (root / "utils.py").write_text(textwrap.dedent(CUTTING).lstrip("\n"))
    assert codes() == ["GT102"]
