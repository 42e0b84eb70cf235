"""Facts across the files of a project, session 32 (NOTE [construction sites]): what a class
is given when it is built in another file. Each case is a small project in tmp_path; the
buggy twins run on real torch to show the claim."""
from __future__ import annotations

import runpy
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings

# OpenTransformer's shape: a table of the project's own schedulers in one file, a trainer that
# stores the scheduler it is given in another, and a script that builds both in a third.
SCHED = """
    import torch

    BuildOptimizer = {"sgd": torch.optim.SGD}


    class BaseScheduler(object):
        def __init__(self, optimizer, lr=0.1):
            self.optimizer = optimizer
            self.global_step = 0
            self.lr = lr

        def set_lr(self):
            for g in self.optimizer.param_groups:
                g["lr"] = self.lr

        def step(self):
            self.global_step += 1
            self.lr = self.get_lr()
            self.set_lr()


    class ConstantScheduler(BaseScheduler):
        def get_lr(self):
            return 0.1


    class DecayScheduler(BaseScheduler):
        def get_lr(self):
            return 0.1 * 0.9 ** self.global_step


    BuildScheduler = {"constant": ConstantScheduler, "decay": DecayScheduler}
    """
TRAINER = """
    import torch


    class Trainer(object):
        def __init__(self, model, optimizer, scheduler, epochs=2):
            self.model = model
            self.optimizer = optimizer
            self.scheduler = scheduler
            self.epochs = epochs

        def train(self, x, y):
            for _ in range(self.epochs):
                loss = ((self.model(x) - y) ** 2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.scheduler.step()
                self.optimizer.step()
    """
STEP_LINE = 16  # `self.scheduler.step()` in TRAINER
RUN = """
    import torch
    from torch import nn
    from pkg.sched import BuildOptimizer, BuildScheduler
    from pkg.trainer import Trainer

    model = nn.Linear(4, 1)
    optimizer = BuildOptimizer["sgd"](model.parameters(), lr=0.1)
    scheduler = {sched}
    trainer = Trainer(model, optimizer=optimizer, scheduler=scheduler)
    trainer.train(torch.randn(8, 4), torch.randn(8, 1))
    """
OWN = 'BuildScheduler["decay"](optimizer)'
TORCH = "torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def project(root: Path, sched: str, **more: str) -> Path:
    return write(root, {"pkg/__init__.py": "", "pkg/sched.py": SCHED, "pkg/trainer.py": TRAINER,
                        "run.py": RUN.format(sched=sched), **more})


def gt515(root: Path) -> list[tuple[str, int]]:
    got = check_paths([str(root)], Settings()).findings
    return [(Path(f.path).name, f.line) for f in got if f.code == "GT515"]


def order_warnings(root: Path) -> list[str]:
    """Run ``run.py`` on real torch: the scheduler-order warnings it raises."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(root))
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            runpy.run_path(str(root / "run.py"), run_name="__main__")
    finally:
        sys.path.remove(str(root))
        for m in ("pkg", "pkg.sched", "pkg.trainer"):
            sys.modules.pop(m, None)
    return [str(w.message) for w in got if "lr_scheduler.step()" in str(w.message)]


def test_own_scheduler_from_a_table_of_another_file_is_silent(tmp_path):
    root = project(tmp_path, OWN)
    assert gt515(root) == []
    assert order_warnings(root) == []


def test_torch_scheduler_given_by_another_file_is_found(tmp_path):
    root = project(tmp_path, TORCH)
    assert gt515(root) == [("trainer.py", STEP_LINE)]
    assert order_warnings(root)  # PyTorch: "Detected call of `lr_scheduler.step()` before ..."


def test_one_torch_scheduler_in_the_table_is_found(tmp_path):
    sched = SCHED.replace('"decay": DecayScheduler}',
                          '"decay": DecayScheduler, "step": torch.optim.lr_scheduler.StepLR}')
    root = project(tmp_path, OWN, **{"pkg/sched.py": sched})
    assert gt515(root) == [("trainer.py", STEP_LINE)]


def test_a_second_site_passing_a_torch_scheduler_is_found(tmp_path):
    other = RUN.format(sched=TORCH)
    root = project(tmp_path, OWN, **{"finetune.py": other})
    assert gt515(root) == [("trainer.py", STEP_LINE)]


def test_a_site_leaving_the_scheduler_to_kwargs_is_unknown(tmp_path):
    run = RUN.format(sched=OWN).replace("scheduler=scheduler)", "**dict(scheduler=scheduler))")
    root = project(tmp_path, OWN, **{"run.py": textwrap.dedent(run)})
    assert gt515(root) == [("trainer.py", STEP_LINE)]  # unknown: the name decides, as before


def test_subclass_inheriting_step_from_a_torch_free_base_is_own(tmp_path):
    root = write(tmp_path, {"train.py": textwrap.dedent(SCHED) + textwrap.dedent("""
        from torch import nn

        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = DecayScheduler(optimizer)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for _ in range(3):
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            scheduler.step()
            optimizer.step()
        """)})
    assert gt515(root) == []


# The VITS family (MeloTTS, RVC, VITS-fast-fine-tuning): the generator (another file) returns
# slice starts made by a helper of a third file, and the training step slices the waveform
# with a helper of `commons.py` that reads the starts only as slice bounds, through a loop.
COMMONS = """
    import torch


    def rand_ids(b, high):
        return (torch.rand([b]) * high).long()


    def slice_segments(x, ids_str, segment_size=4):
        ret = torch.zeros_like(x[:, :, :segment_size])
        for i in range(x.size(0)):
            idx_str = ids_str[i]
            idx_end = idx_str + segment_size
            ret[i] = x[i, :, idx_str:idx_end]
        return ret
    """
MODELS = """
    from torch import nn
    import commons


    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Conv1d(1, 1, 3, padding=1)

        def forward(self, z):
            h = self.net(z)
            return h[:, :, :8], commons.rand_ids(z.size(0), 4)
    """
VITS = """
    import torch
    from torch import nn
    import commons
    from models import Generator


    def train_and_evaluate(nets, optims, batches):
        net_g, net_d = nets
        optim_g, optim_d = optims
        for z, y in batches:
            y_hat, ids_slice = net_g(z)
            y = {use}
            loss_disc = (net_d(y) - 1).pow(2).mean() + net_d(y_hat.detach()).pow(2).mean()
            optim_d.zero_grad()
            loss_disc.backward()
            optim_d.step()
            loss_gen = (net_d(y_hat) - 1).pow(2).mean() + (y.mean() - y_hat.mean()).abs()
            optim_g.zero_grad()
            loss_gen.backward()
            optim_g.step()


    net_g, net_d = Generator(), nn.Conv1d(1, 1, 3)
    optims = torch.optim.AdamW(net_g.parameters()), torch.optim.AdamW(net_d.parameters())
    train_and_evaluate([net_g, net_d], optims, [(torch.randn(2, 1, 32), torch.randn(2, 1, 32))])
    """
TARGET = "commons.slice_segments(y, ids_slice * 6, 8)"
GEN_OUT = "commons.slice_segments(y_hat, ids_slice, 4)"
LOSS_GEN_LINE = 17  # `loss_gen = ...` of VITS: `y` read again after the step


def vits(root: Path, use: str) -> Path:
    return write(root, {"commons.py": COMMONS, "models.py": MODELS,
                        "train.py": VITS.format(use=use)})


def runs(root: Path) -> str | None:
    """Run ``train.py`` on real torch: None, or the error it ends with."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(root))
    try:
        runpy.run_path(str(root / "train.py"), run_name="__main__")
    except RuntimeError as exc:
        return str(exc)
    finally:
        sys.path.remove(str(root))
        for m in ("commons", "models"):
            sys.modules.pop(m, None)
    return None


def codes(root: Path) -> list[str]:
    return [f.code for f in check_paths([str(root)], Settings()).findings]


def lines(root: Path) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_paths([str(root)], Settings()).findings]


def test_vits_target_sliced_by_a_helper_reading_starts_as_bounds_is_silent(tmp_path):
    root = vits(tmp_path, TARGET)
    assert codes(root) == []
    assert runs(root) is None


def test_vits_twin_generator_output_sliced_into_the_target_is_found(tmp_path):
    """The helper's first parameter carries its graph: the generator's output, sliced without
    `detach()`, is freed by the discriminator's backward and read again by the generator's."""
    root = vits(tmp_path, GEN_OUT)
    assert lines(root) == [("GT509", LOSS_GEN_LINE)]
    assert "backward through the graph a second time" in (runs(root) or "")


def test_starts_read_as_values_in_the_loop_still_carry(tmp_path):
    """A helper that reads its second parameter as a value (not only as bounds) keeps it."""
    commons = COMMONS.replace("ret[i] = x[i, :, idx_str:idx_end]",
                              "ret[i] = x[i, :, idx_str:idx_end] * idx_str")
    root = write(tmp_path, {"commons.py": commons, "models.py": MODELS.replace(
        "commons.rand_ids(z.size(0), 4)", "h[:, :, :2].mean(-1).squeeze(1)"),
        "train.py": VITS.format(use="commons.slice_segments(y, ids_slice, 8)")})
    assert codes(root) == ["GT509"]


# Latte: the project's own copy of `clip_grad_norm_`, with a flag that turns the clip off
# (the call then only measures the norm), called before backward with the flag off.
CLIP_UTILS = """
    import torch


    def clip_grad_norm_(parameters, max_norm, norm_type=2.0, clip_grad=True):
        grads = [p.grad for p in parameters if p.grad is not None]
        if len(grads) == 0:
            return torch.tensor(0.)
        total_norm = torch.norm(torch.stack([torch.norm(g.detach(), norm_type) for g in grads]),
                                norm_type)
        if clip_grad:
            clip_coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
            for g in grads:
                g.detach().mul_(clip_coef)
        return total_norm
    """
CLIP_TRAIN = """
    import torch
    from torch import nn
    from utils import clip_grad_norm_

    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4) * 100, torch.randn(8, 1)
    for _ in range(2):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        norm = {call}
        loss.backward()
        applied = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        opt.step()
    """
CLIP_LINE = 11  # the `norm = ...` line of CLIP_TRAIN


def clip_project(root: Path, call: str, utils: str = CLIP_UTILS) -> Path:
    return write(root, {"utils.py": utils, "train.py": CLIP_TRAIN.format(call=call)})


def applied_norm(root: Path) -> float:
    """Run ``train.py`` on real torch: the norm of the gradients its last step applied."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(root))
    try:
        return float(runpy.run_path(str(root / "train.py"), run_name="__main__")["applied"])
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("utils", None)


def test_own_clip_with_its_flag_off_only_measures_and_is_silent(tmp_path):
    root = clip_project(tmp_path, "clip_grad_norm_(model.parameters(), 1.0, clip_grad=False)")
    assert lines(root) == []
    assert applied_norm(root) > 1.0  # nothing was meant to be clipped


def test_own_clip_with_its_flag_on_before_backward_is_found(tmp_path):
    root = clip_project(tmp_path, "clip_grad_norm_(model.parameters(), 1.0, clip_grad=True)")
    assert lines(root) == [("GT514", CLIP_LINE)]
    assert applied_norm(root) > 1.0  # the step applied unclipped gradients


def test_own_clip_left_to_its_default_flag_is_found(tmp_path):
    root = clip_project(tmp_path, "clip_grad_norm_(model.parameters(), 1.0)")
    assert lines(root) == [("GT514", CLIP_LINE)]


def test_own_clip_calling_another_helper_under_the_flag_is_found(tmp_path):
    utils = CLIP_UTILS.replace("""            for g in grads:
                g.detach().mul_(clip_coef)""", """            scale(grads, clip_coef)""") + """

    def scale(grads, c):
        for g in grads:
            g.detach().mul_(c)
    """
    root = clip_project(tmp_path, "clip_grad_norm_(model.parameters(), 1.0, clip_grad=True)",
                        utils)
    assert lines(root) == [("GT514", CLIP_LINE)]
