"""Facts across files and calls, session 33: the last false alarms of the unseen corpora that
needed a fact of another file or call. Each case is a small project in tmp_path; look-alikes
and buggy twins run on real torch where the claim is about torch."""
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


def found(root: Path, code: str) -> list[tuple[str, int]]:
    got = check_paths([str(root)], Settings()).findings
    return sorted((Path(f.path).name, f.line) for f in got if f.code == code)


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


# CRSLab's GRU4Rec (NOTE [own loss element]): the forward computes its own loss from item
# embeddings and returns the ranking scores beside it, built from `.weight.data`; the system
# (another file) backpropagates the loss and only ranks the scores.
MODEL = """
    import torch
    import torch.nn.functional as F
    from torch import nn


    class GRU4Rec(nn.Module):
        def __init__(self, n_items=20, dim=8):
            super().__init__()
            self.item_embeddings = nn.Embedding(n_items, dim)
            self.gru = nn.GRU(dim, dim, batch_first=True)

        def cross_entropy(self, seq_out, pos_ids, neg_ids):
            pos = self.item_embeddings(pos_ids).view(-1, seq_out.size(-1))
            neg = self.item_embeddings(neg_ids).view(-1, seq_out.size(-1))
            seq = seq_out.contiguous().view(-1, seq_out.size(-1))
            pos_logits = torch.sum(pos * seq, -1)
            neg_logits = torch.sum(neg * seq, -1)
            loss = torch.sum(-torch.log(torch.sigmoid(pos_logits) + 1e-24)
                             - torch.log(1 - torch.sigmoid(neg_logits) + 1e-24)) / pos.size(0)
            return loss

        def forward(self, input_ids, pos_ids, neg_ids):
            output, _ = self.gru(self.item_embeddings(input_ids))
            last = output[:, -1, :]
            rec_scores = torch.matmul(last, self.item_embeddings.weight{data}.T)
            rec_loss = {loss}
            return {ret}
    """
DATA_LINE = 25  # `rec_scores = ...weight.data.T` in MODEL
OWN_LOSS = "self.cross_entropy(output, pos_ids, neg_ids)"
SYSTEM = """
    import torch
    import torch.nn.functional as F
    from rec.model import GRU4Rec

    torch.manual_seed(0)
    model = GRU4Rec()
    ids = torch.randint(1, 20, (4, 5))
    pos, neg = torch.randint(1, 20, (4, 5)), torch.randint(1, 20, (4, 5))
    {use}
    loss.backward()
    grad = model.item_embeddings.weight.grad.clone()
    """
RANKS = """rec_loss, rec_scores = model(ids, pos, neg)
    _, ranked = torch.topk(rec_scores, k=3, dim=-1)
    loss = rec_loss"""
TRAINS = """rec_scores = model(ids, pos, neg)
    loss = F.cross_entropy(rec_scores, pos[:, -1])"""


def rec_project(root: Path, data: str = ".data", loss: str = OWN_LOSS,
                ret: str = "rec_loss, rec_scores", use: str = RANKS) -> Path:
    return write(root, {"rec/__init__.py": "", "rec/model.py": MODEL.format(
        data=data, loss=loss, ret=ret), "system.py": SYSTEM.format(use=use)})


def weight_grad(root: Path):  # type: ignore[no-untyped-def]
    return run(root, "system.py", ("rec",))["grad"]


def test_data_scores_beside_the_forwards_own_loss_are_silent(tmp_path):
    root = rec_project(tmp_path / "a")
    assert found(root, "GT105") == []
    # on torch the loss trains the embedding, and `.data` in the scores changes nothing of it
    with_data = weight_grad(root)
    assert with_data.abs().sum() > 0
    without = weight_grad(rec_project(tmp_path / "b", data=""))
    assert (with_data == without).all()


def test_data_scores_the_caller_trains_on_are_found(tmp_path):
    root = rec_project(tmp_path / "a", ret="rec_scores", use=TRAINS)
    assert found(root, "GT105") == [("model.py", DATA_LINE)]
    # on torch the `.data` path gives the weight no gradient: it differs from the live one
    without = weight_grad(rec_project(tmp_path / "b", data="", ret="rec_scores", use=TRAINS))
    assert not (weight_grad(root) == without).all()


def test_data_scores_inside_the_returned_loss_are_found(tmp_path):
    loss = "F.cross_entropy(rec_scores, pos_ids[:, -1]) + " + OWN_LOSS
    root = rec_project(tmp_path / "a", loss=loss)
    assert found(root, "GT105") == [("model.py", DATA_LINE)]
    without = weight_grad(rec_project(tmp_path / "b", data="", loss=loss))
    assert not (weight_grad(root) == without).all()


# 3DInfomax's PhilosophyTrainer: the optimizer class is handed in by a script (another file),
# through the base trainer of a third file, to the subclass's `initialize_optimizer`
# (NOTE [optimizer class given]); each backward passes `inputs=` one module's parameters, so
# it runs only that module's nodes and those after it (NOTE [grad inputs]).
BASE = """
    class Trainer:
        def __init__(self, model, optim, loss_func):
            self.model = model
            self.loss_func = loss_func
            self.initialize_optimizer(optim)

        def initialize_optimizer(self, optim):
            self.optim = optim(self.model.parameters(), lr=0.01)
    """
PHILOSOPHY = """
    import torch

    from trainer.base import Trainer


    class PhilosophyTrainer(Trainer):
        def __init__(self, model, model3d, critic, optim, loss_func):
            self.model3d = model3d
            self.critic = critic
            super().__init__(model, optim, loss_func)

        def initialize_optimizer(self, optim):
            normal = [v for k, v in self.model.named_parameters() if "norm" not in k]
            self.optim = optim([{{"params": normal}}], lr=0.01)
            self.optim3d = optim(self.model3d.parameters(), lr=0.01)
            self.optim_critic = optim(self.critic.parameters(), lr=0.01)

        def forward_pass(self, graph, info3d):
            view2d = self.model(graph)
            view3d = self.model3d(info3d)
            reconstruction = self.critic(view3d)
            critic_loss = self.loss_func(view3d, reconstruction)
            peasant_loss = self.loss_func(view2d, view3d)
            philosopher_loss = peasant_loss - critic_loss
            return peasant_loss, philosopher_loss, critic_loss

        def process_batch(self, graph, info3d):
            peasant_loss, philosopher_loss, critic_loss = self.forward_pass(graph, info3d)
            {steps}
            self.optim.zero_grad()
            self.optim3d.zero_grad()
            self.optim_critic.zero_grad()
    """
FIRST_STEP = 30  # the line after `peasant_loss.backward(...)` in PHILOSOPHY
IN_ORDER = """peasant_loss.backward(inputs=list(self.model.parameters()), retain_graph=True)
            self.optim.step()
            philosopher_loss.backward(inputs=list(self.model3d.parameters()), retain_graph=True)
            self.optim3d.step()
            critic_loss.backward(inputs=list(self.critic.parameters()))
            self.optim_critic.step()"""
RUN3D = """
    import torch
    from torch import nn
    from trainer.philosophy import PhilosophyTrainer


    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 8), nn.Tanh(), nn.Linear(8, o))


    trainer = PhilosophyTrainer(mlp(6, 4), mlp(6, 4), mlp(4, 4),
                                optim=getattr(torch.optim, "Adam"), loss_func=nn.MSELoss())
    for _ in range(3):
        trainer.process_batch(torch.randn(5, 6), torch.randn(5, 6))
    """


def philosophy(root: Path, steps: str) -> Path:
    return write(root, {"trainer/__init__.py": "", "trainer/base.py": BASE,
                        "trainer/philosophy.py": PHILOSOPHY.format(steps=steps),
                        "run.py": RUN3D})


def test_passes_restricted_to_modules_the_step_does_not_feed_are_silent(tmp_path):
    root = philosophy(tmp_path, IN_ORDER)
    assert found(root, "GT601") == []
    run(root, "run.py", ("trainer",))  # runs: no pass needs a stepped module's saved weights


def test_critic_stepped_before_the_pass_that_runs_it_is_found(tmp_path):
    steps = IN_ORDER.replace(
        "critic_loss.backward(inputs=list(self.critic.parameters()))\n"
        "            self.optim_critic.step()", "").replace(
        "philosopher_loss.backward",
        "critic_loss.backward(inputs=list(self.critic.parameters()), retain_graph=True)\n"
        "            self.optim_critic.step()\n"
        "            philosopher_loss.backward")
    root = philosophy(tmp_path, steps)
    # the 3D pass runs the critic (it reads the 3D model's output), whose weights were stepped
    assert found(root, "GT601") == [("philosophy.py", FIRST_STEP + 2)]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(root, "run.py", ("trainer",))


def test_an_unrestricted_pass_after_the_step_is_found(tmp_path):
    steps = IN_ORDER.replace(
        "philosopher_loss.backward(inputs=list(self.model3d.parameters()), retain_graph=True)",
        "philosopher_loss.backward(retain_graph=True)")
    root = philosophy(tmp_path, steps)
    assert found(root, "GT601") == [("philosophy.py", FIRST_STEP)]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(root, "run.py", ("trainer",))


INLINE = """
    import torch
    from torch import nn


    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 8), nn.Tanh(), nn.Linear(8, o))


    class Trainer:
        def __init__(self, optim):
            self.model, self.model3d, self.critic = mlp(6, 4), mlp(6, 4), mlp(4, 4)
            self.optim = optim(self.model.parameters(), lr=0.01)
            self.optim3d = optim(self.model3d.parameters(), lr=0.01)
            self.optim_critic = optim(self.critic.parameters(), lr=0.01)

        def process_batch(self, graph, info3d):
            view2d = self.model(graph)
            view3d = self.model3d(info3d)
            critic = {critic}
            critic_loss = ((critic(view3d) - view3d) ** 2).mean()
            peasant_loss = ((view2d - view3d) ** 2).mean()
            philosopher_loss = peasant_loss - critic_loss
            peasant_loss.backward(inputs=list(self.model.parameters()), retain_graph=True)
            self.optim.step()
            critic_loss.backward(inputs=list(self.critic.parameters()), retain_graph=True)
            self.optim_critic.step()
            philosopher_loss.backward(inputs=list(self.model3d.parameters()))
            self.optim3d.step()


    trainer = Trainer(torch.optim.Adam)
    for _ in range(2):
        trainer.process_batch(torch.randn(5, 6), torch.randn(5, 6))
    """
CRITIC_STEP = 26  # `self.optim_critic.step()` in INLINE


def test_inline_passes_the_step_does_not_feed_are_silent_and_the_fed_one_is_found(tmp_path):
    # the 2D step is silent (the critic and 3D passes run none of the 2D model); the critic's
    # step before the 3D pass, which runs the critic on the 3D output, is found
    root = write(tmp_path, {"train.py": INLINE.format(critic="self.critic")})
    assert found(root, "GT601") == [("train.py", CRITIC_STEP)]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(root, "train.py", ())


def test_a_module_bound_to_another_name_counts_as_run(tmp_path):
    root = write(tmp_path, {"train.py": INLINE.format(critic="self.critic if graph.numel() "
                                                      "else self.model")})
    # `critic` may be the 2D model: the 2D step before the critic's pass is kept too
    assert found(root, "GT601") == [("train.py", CRITIC_STEP - 2), ("train.py", CRITIC_STEP)]
