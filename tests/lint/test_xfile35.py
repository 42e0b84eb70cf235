"""Facts from another file of the project, session 35: names bound by a star import (NOTE
[project index]), a property nothing in the project reads (NOTE [reverse index]). Each case is a small project in tmp_path; look-alikes and buggy twins
run on real torch where the claim is about torch."""
from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def found(root: Path, *codes: str) -> list[tuple[str, str, int]]:
    got = check_paths([str(root)], Settings()).findings
    return sorted((f.code, Path(f.path).name, f.line) for f in got if f.code in codes)


def run(root: Path, script: str, packages: tuple[str, ...]) -> dict:
    """Run ``script`` of the project on real torch; its globals."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(root))
    try:
        return runpy.run_path(str(root / script), run_name="__main__")
    finally:
        sys.path.remove(str(root))
        for m in list(sys.modules):
            if m.split(".")[0] in packages:
                sys.modules.pop(m, None)


# Background-Matting (train_real_fixed.py, `from functions import *`): the generator's output
# is re-composited by a helper of another file that writes it row by row into a fresh tensor
# and returns `torch.autograd.Variable(out)`, a tensor without history; the discriminator step
# then feeds it to `netD` without `.detach()`, and its backward never reaches the generator.
HELPERS = textwrap.dedent("""
    import torch


    def shifted(fake, bg):
        out = torch.zeros(fake.shape)
        for t in range(fake.shape[0]):
            out[t, ...] = torch.roll(fake[t], 1, dims=-1) * 0.5 + bg[t] * 0.5
        return {ret}
""")
TRAIN = textwrap.dedent("""
    import torch
    from torch import nn
    {imports}


    def train(netG, netD, optimizerG, optimizerD, loader):
        for x, bg in loader:
            fake = netG(x)
            image_sh = shifted(fake, bg)
            lossG = -netD(image_sh).mean() + fake.pow(2).mean()
            optimizerG.zero_grad()
            lossG.backward()
            optimizerG.step()
            lossD = netD(image_sh).mean() - netD(x).mean()
            optimizerD.zero_grad()
            lossD.backward()
            optimizerD.step()
        return image_sh


    if __name__ == "__main__":
        netG, netD = nn.Linear(4, 4), nn.Linear(4, 1)
        image_sh = train(netG, netD, torch.optim.SGD(netG.parameters(), lr=0.1),
                         torch.optim.SGD(netD.parameters(), lr=0.1),
                         [(torch.randn(3, 4), torch.randn(3, 4)) for _ in range(2)])
""")
CUT, FREED = 9, 12  # `image_sh = shifted(...)`, `lossG.backward()`
CODES = ("GT508", "GT509", "GT109")


# the look-alike: the second backward runs; the generator's adversarial term gets nothing
# through the helper (the real bug, GT109: `netG`'s gradient from it is zero on torch)
LOOKALIKE = [("GT109", "train.py", CUT)]


def star_project(tmp_path: Path, ret: str, imports: str = "from functions import *",
                 extra: dict[str, str] | None = None) -> Path:
    return write(tmp_path, {"functions.py": HELPERS.format(ret=ret),
                            "train.py": TRAIN.format(imports=imports), **(extra or {})})


def test_a_star_imported_helper_returning_a_variable_without_history_is_silent(tmp_path):
    root = star_project(tmp_path, "torch.autograd.Variable(out)")
    assert found(root, *CODES) == LOOKALIKE
    g = run(root, "train.py", ("functions", "train"))  # the second backward runs
    assert g["image_sh"].grad_fn is None


def test_a_star_imported_helper_returning_its_graph_is_found(tmp_path):
    root = star_project(tmp_path, "out")
    assert found(root, *CODES) == [("GT509", "train.py", FREED)]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        run(root, "train.py", ("functions", "train"))


def test_a_later_star_import_whose_all_leaves_the_name_out_does_not_win(tmp_path):
    # `graphs` defines `shifted` returning its graph; `functions`' `shifted` cuts, but its
    # `__all__` does not list it: the name comes from `graphs`
    graphs = HELPERS.format(ret="out")
    plain = "__all__ = ['other']\n\n" + HELPERS.format(
        ret="torch.autograd.Variable(out)") + "\n\ndef other():\n    return 1\n"
    root = star_project(tmp_path, "out", "from graphs import *\nfrom functions import *",
                        {"graphs.py": graphs, "functions.py": plain})
    assert found(root, *CODES) == [("GT509", "train.py", FREED + 1)]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        run(root, "train.py", ("functions", "graphs", "train"))
    listed = plain.replace("['other']", "['other', 'shifted']")
    (root / "functions.py").write_text(listed)
    assert found(root, *CODES) == [("GT109", "train.py", CUT + 1)]  # now it does win
    assert run(root, "train.py", ("functions", "graphs", "train"))["image_sh"].grad_fn is None


def test_a_star_import_through_a_package_init_is_followed(tmp_path):
    root = write(tmp_path, {
        "lib/__init__.py": "from .functions import *\n",
        "lib/functions.py": HELPERS.format(ret="torch.autograd.Variable(out)"),
        "train.py": TRAIN.format(imports="from lib import *")})
    assert found(root, *CODES) == LOOKALIKE
    assert run(root, "train.py", ("lib", "train"))["image_sh"].grad_fn is None
    (root / "lib/functions.py").write_text(HELPERS.format(ret="out"))
    assert found(root, *CODES) == [("GT509", "train.py", FREED)]


def test_a_name_the_file_binds_itself_is_not_taken_from_the_star_import(tmp_path):
    # the script's own `shifted` (its graph) shadows the star import's (a cut)
    root = star_project(tmp_path, "torch.autograd.Variable(out)",
                        "from functions import *\n\n\ndef shifted(fake, bg):\n"
                        "    return fake * 0.5 + bg * 0.5\n")
    assert found(root, *CODES) == [("GT509", "train.py", FREED + 5)]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        run(root, "train.py", ("functions", "train"))


def test_an_all_built_at_run_time_gives_no_fact(tmp_path):
    plain = "__all__ = [n for n in ('shifted',)]\n\n" + HELPERS.format(
        ret="torch.autograd.Variable(out)")
    root = star_project(tmp_path, "out", extra={"functions.py": plain})
    assert found(root, *CODES) == [("GT509", "train.py", FREED)]  # as before: the index says nothing


def test_an_edit_of_the_star_imported_file_refreshes_the_cache(tmp_path, monkeypatch, capsys):
    from gradtrace.cli import main
    root = star_project(tmp_path, "torch.autograd.Variable(out)")
    monkeypatch.chdir(root)
    monkeypatch.delenv("GRADTRACE_NO_CACHE", raising=False)
    monkeypatch.delenv("GRADTRACE_CACHE_DIR", raising=False)

    def codes() -> int:
        main(["check", "--jobs", "1", "--format", "json", "--exit-zero", "train.py"])
        return capsys.readouterr().out.count('"GT509"')

    assert codes() == 0
    assert codes() == 0  # answered from the cache
    (root / "functions.py").write_text(HELPERS.format(ret="out"))
    assert codes() == 1  # the star module changed: train.py is checked again


# GraphMAE2 (models/edcoder.py): `PreModel.dec_params`, a property, lists the decoder's parts
# for a second optimizer that was never written; the training script builds its one optimizer
# over `model.parameters()`. Nothing in the project reads the property: the groups, which leave
# out `enc_mask_token`, reach no optimizer.
PREMODEL = textwrap.dedent("""
    from itertools import chain

    import torch
    from torch import nn


    class PreModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(4, 4)
            self.enc_mask_token = nn.Parameter(torch.zeros(1, 4))
            self.encoder_to_decoder = nn.Linear(4, 4)
            self.decoder = nn.Linear(4, 4)

        def forward(self, x, mask):
            x = torch.where(mask, self.enc_mask_token, x)
            return self.decoder(self.encoder_to_decoder(self.encoder(x)))

        @property
        def dec_params(self):
            return chain(*[self.encoder_to_decoder.parameters(), self.decoder.parameters()])
""")
GROUPS_LINE = 21
MAIN = textwrap.dedent("""
    import torch

    from model import PreModel

    model = PreModel()
    opt = torch.optim.SGD({params}, lr=0.1)
    x, mask = torch.randn(8, 4), torch.rand(8, 1) < 0.5
    before = model.enc_mask_token.detach().clone()
    for _ in range(3):
        opt.zero_grad()
        model(x, mask).pow(2).mean().backward()
        opt.step()
""")


def test_parameter_groups_of_a_property_nothing_reads_are_silent(tmp_path):
    root = write(tmp_path, {"model.py": PREMODEL, "main.py": MAIN.format(
        params="model.parameters()")})
    assert found(root, "GT462") == []
    g = run(root, "main.py", ("model", "main"))  # the mask token trains
    assert not torch_equal(g["model"].enc_mask_token, g["before"])


def test_parameter_groups_of_a_property_another_file_builds_an_optimizer_from_are_found(
        tmp_path):
    root = write(tmp_path, {"model.py": PREMODEL, "main.py": MAIN.format(
        params="model.dec_params")})
    assert found(root, "GT462") == [("GT462", "model.py", GROUPS_LINE)]
    g = run(root, "main.py", ("model", "main"))  # a gradient, never a step
    assert g["model"].enc_mask_token.grad is not None
    assert torch_equal(g["model"].enc_mask_token, g["before"])


def test_a_property_read_in_its_own_file_keeps_the_finding(tmp_path):
    own = PREMODEL + textwrap.dedent("""

        def optimizer(model):
            return torch.optim.Adam(model.dec_params, lr=1e-3)
    """)
    root = write(tmp_path, {"model.py": own, "main.py": MAIN.format(
        params="model.parameters()")})
    assert found(root, "GT462") == [("GT462", "model.py", GROUPS_LINE)]


def test_a_reader_added_in_another_file_refreshes_the_cache(tmp_path, monkeypatch, capsys):
    from gradtrace.cli import main
    root = write(tmp_path, {"model.py": PREMODEL, "main.py": MAIN.format(
        params="model.parameters()"), "other.py": "import torch\n"})
    monkeypatch.chdir(root)
    monkeypatch.delenv("GRADTRACE_NO_CACHE", raising=False)
    monkeypatch.delenv("GRADTRACE_CACHE_DIR", raising=False)

    def codes() -> int:
        main(["check", "--jobs", "1", "--format", "json", "--exit-zero", "."])
        return capsys.readouterr().out.count('"GT462"')

    assert codes() == 0
    assert codes() == 0  # answered from the cache
    (root / "other.py").write_text("import torch\n\n\ndef make(model):\n"
                                   "    return torch.optim.Adam(model.dec_params)\n")
    assert codes() == 1  # model.py's search finds a reader: checked again


def torch_equal(a, b) -> bool:
    import torch
    return bool(torch.equal(a.detach(), b))


def test_an_all_grown_in_a_loop_gives_no_fact(tmp_path):
    # `functions`' `__all__` seems to leave its `shifted` (graph) out, but a loop adds it:
    # reading the literal alone would take `graphs`' cut; the index says nothing instead
    graphs = HELPERS.format(ret="torch.autograd.Variable(out)")
    grown = "__all__ = ['other']\n" + HELPERS.format(ret="out") + \
        "\n\ndef other():\n    return 1\n\n\nfor _n in ('shifted',):\n    __all__.append(_n)\n"
    root = star_project(tmp_path, "out", "from graphs import *\nfrom functions import *",
                        {"graphs.py": graphs, "functions.py": grown})
    assert found(root, *CODES) == [("GT509", "train.py", FREED + 1)]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        run(root, "train.py", ("functions", "graphs", "train"))
