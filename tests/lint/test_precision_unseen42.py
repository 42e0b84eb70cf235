"""Shapes from the projects of docs/triage/unseen42.md (session 42), each in another spelling
than the project's and next to a buggy twin that is still reported; each runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import os
import tempfile
import warnings
from dataclasses import dataclass, field
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
def _raises(run):
    try:
        run()
    except RuntimeError as e:
        return "requires grad" in str(e)
    return False
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Al-aminI/qwen3-llm-from-scratch (`universal_vllm_engine.py`): a paged KV cache module
    # keeps `self.blocks = [Block(i) for i in range(n)]`, `Block` a `@dataclass` of the file
    # (an id and a reference count). GT401 took the name `Block` for a layer of another file.
    # Look-alike: a record class of the file (nothing to register); twin: `Block` an
    # `nn.Module` of the file with a weight (its parameters are missed)
    "plain-record-class-named-like-a-layer": (Shape("""
        @dataclass
        class Block:
            block_id: int
            refs: int = 0
            seqs: list = field(default_factory=list)
        class PagedCache(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("keys", torch.zeros(n, 4))
                self.blocks = [Block(i) for i in range(n)]
        cache = PagedCache(3)
        cache.blocks[1].refs += 1
        """, "GT401", holds="cache.blocks[1].refs == 1 and not list(cache.parameters())"),
        Shape("""
        class Block(nn.Module):
            def __init__(self, i):
                super().__init__()
                self.proj = nn.Linear(4, 4)
        class PagedCache(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("keys", torch.zeros(n, 4))
                self.blocks = [Block(i) for i in range(n)]
        cache = PagedCache(3)
        """, "GT401", line=9, holds="not list(cache.parameters())")),
    # JonasVervloet/Generative-Point-Clouds (`network_text_converter.py`): `load_losses`
    # returns `np.load(self.path + category + "loss_epoch{}.npy".format(epoch))`, the loss
    # history saved by the training; GT103 read the path as a tensor handed to NumPy.
    # Look-alike: a history read back from a file; twin: the method hands the model's output
    # to NumPy (raises "requires grad")
    "loss-history-read-back-with-np-load": (Shape("""
        class History:
            def __init__(self, folder):
                self.folder = folder
            def load_losses(self, epoch, train):
                if train:
                    split = "train"
                else:
                    split = "val"
                return np.load(self.folder + split + "_loss_{}.npy".format(epoch))
        hist = History(tempfile.mkdtemp() + os.sep)
        np.save(hist.folder + "train_loss_1.npy", np.array([0.5, 0.25]))
        """, "GT103", holds="np.allclose(hist.load_losses(1, True), [0.5, 0.25])"), Shape("""
        class History:
            def __init__(self, model):
                self.model = model
            def load_losses(self, x, train):
                if train:
                    self.model.train()
                return np.abs(self.model(x) - x.sum())
        hist = History(nn.Linear(2, 1))
        """, "GT103", line=7, holds="_raises(lambda: hist.load_losses(torch.randn(3, 2), True))")),
    # Istlemin/knowledge-distillation-transformers (`kd.py`): the student-to-teacher maps are
    # `[nn.Linear(...) for i in range(n)]` when `transform_per_layer`, else `[nn.Linear(...)]
    # * n`: one map shared by every layer, the option the flag chooses. Look-alike: both arms;
    # twin: the multiplied list alone (one layer where n were meant)
    "shared-layer-as-the-other-arm-of-a-flag": (Shape("""
        class Maps(nn.Module):
            def __init__(self, n, per_layer):
                super().__init__()
                if per_layer:
                    self.maps = nn.ModuleList([nn.Linear(4, 8) for _ in range(n)])
                else:
                    self.maps = nn.ModuleList([nn.Linear(4, 8)] * n)
        shared = Maps(3, False)
        """, "GT446", holds="len(list(shared.parameters())) == 2"), Shape("""
        class Maps(nn.Module):
            def __init__(self, n, deep):
                super().__init__()
                if deep:
                    self.maps = nn.ModuleList([nn.Linear(4, 8)] * n)
                else:
                    self.maps = nn.ModuleList([nn.Linear(4, 8)])
        deep = Maps(3, True)
        """, "GT446", line=5, holds="len(list(deep.parameters())) == 2")),
    # Ofir-Shechtman/CS236781-Deep-Learning-hw4 (`project/train.py`): the WGAN critic step
    # `l_real, l_fake = dsc_loss_fn(d(x), d(fake))` with `dsc_loss_fn` a parameter (the file
    # also has a module-level `dsc_loss_fn`), returning `y_data.mean()` and `y_gen.mean()`:
    # two forward passes, two graphs; GT509 took both names for one graph. Look-alike: two
    # forward passes handed in (runs); twin: one forward pass of both batches (raises)
    "handed-in-loss-of-two-forward-passes": (Shape("""
        def critic_loss(real, fake):
            return real.mean() - fake.mean()
        def wgan_terms(y_real, y_fake):
            return y_real.mean(0).view(1), y_fake.mean(0).view(1)
        def critic_step(critic, critic_loss, opt, x, fake):
            opt.zero_grad()
            y_real = critic(x)
            y_fake = critic(fake)
            l_real, l_fake = critic_loss(y_real, y_fake)
            l_real.backward()
            l_fake.backward(torch.tensor([-1.0]))
            opt.step()
        d = nn.Linear(3, 1)
        critic_step(d, wgan_terms, torch.optim.SGD(d.parameters(), lr=0.1), torch.randn(4, 3),
                    torch.randn(4, 3))
        """, "GT509"), Shape("""
        def critic_loss(real, fake):
            return real.mean() - fake.mean()
        def halves(y):
            return y[:4].mean(0).view(1), y[4:].mean(0).view(1)
        def critic_step(critic, critic_loss, opt, x, fake):
            opt.zero_grad()
            y_both = critic(torch.cat([x, fake]))
            l_real, l_fake = critic_loss(torch.tanh(y_both))
            l_real.backward()
            l_fake.backward(torch.tensor([-1.0]))
            opt.step()
        d = nn.Linear(3, 1)
        critic_step(d, halves, torch.optim.SGD(d.parameters(), lr=0.1), torch.randn(4, 3),
                    torch.randn(4, 3))
        """, "GT509", line=9, raises=(RuntimeError, "second time"))),
    # gauthambekal93/query-only-attention-for-continual-learning (`deep_ffnn.py`): hidden
    # `Layer` modules kept in a plain list, each one's `layers` (an `nn.ModuleList`) added to
    # the model's own `self.layers = nn.ModuleList()` by `self.layers.extend(...)`: every weight
    # is registered. Look-alike: the entries' layers extend a registered container; twin: they
    # are appended to a plain list (missed by `parameters()`)
    "entries-whose-layers-extend-a-registered-list": (Shape("""
        class Unit(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.parts = nn.ModuleList([self.fc, nn.ReLU()])
        class Deep(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.parts = nn.ModuleList()
                self.hidden = []
                for i in range(n):
                    self.hidden.append(Unit(d))
                    self.parts.extend(self.hidden[i].parts)
        net = Deep(4, 2)
        """, "GT401", holds="len(list(net.parameters())) == 4"), Shape("""
        class Unit(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.parts = nn.ModuleList([self.fc, nn.ReLU()])
        class Deep(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.pieces = []
                self.hidden = []
                for i in range(n):
                    self.hidden.append(Unit(d))
                    self.pieces.extend(self.hidden[i].parts)
        net = Deep(4, 2)
        """, "GT401", line=10, holds="len(list(net.parameters())) == 0")),
    # LSX-UniWue/recsys-22-user-attributes-recommender (`markov_module.py`): a transition
    # matrix kept as `Parameter(..., requires_grad=False)` so that checkpoints save it,
    # normalised by `F.normalize(m, p=1, dim=1, out=m)`; GT604 took every Parameter for one
    # that requires grad. Look-alike: the frozen Parameter (runs); twin: a trainable one
    # (raises)
    "out-write-into-a-frozen-parameter": (Shape("""
        class Markov(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.table = nn.Parameter(torch.full((n, n), 1.0 / n), requires_grad=False)
            def normalise(self):
                F.normalize(self.table, p=1, dim=1, out=self.table)
        m = Markov(3)
        m.normalise()
        """, "GT604", holds="torch.allclose(m.table.sum(1), torch.ones(3))"), Shape("""
        class Markov(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.table = nn.Parameter(torch.full((n, n), 1.0 / n))
            def normalise(self):
                F.normalize(self.table, p=1, dim=1, out=self.table)
        m = Markov(3)
        m.normalise()
        """, "GT604", line=6, raises=(RuntimeError, "out="))),
    # NadavFireman/Deep-Learning-HW2-Convolutional-Networks (`convolutional_networks.ipynb`):
    # `model.train()` opens each pass of the outer loop; `evaluate(model, ...)` (which calls
    # `model.eval()`) runs when `iter_count % len(train_loader) == 0`, the inner loop's last
    # batch. GT516 read it as an evaluation in the middle of the epoch. Look-alike: the
    # evaluation on the epoch's last batch (no step follows in eval mode); twin: every second
    # batch (the next batch trains with dropout off)
    "evaluation-on-the-epochs-last-batch": (Shape("""
        model = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)]
        modes = []
        def evaluate(m):
            m.eval()
            with torch.no_grad():
                return sum(F.mse_loss(m(x), y).item() for x, y in loader)
        step, limit = 0, 10
        while step < limit:
            model.train()
            for x, y in loader:
                if step >= limit:
                    break
                modes.append(model.training)
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                if step % len(loader) == 0 or step == limit:
                    evaluate(model)
        """, "GT516", holds="all(modes)"), Shape("""
        model = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)]
        modes = []
        def evaluate(m):
            m.eval()
            with torch.no_grad():
                return sum(F.mse_loss(m(x), y).item() for x, y in loader)
        step, limit = 0, 10
        while step < limit:
            model.train()
            for x, y in loader:
                if step >= limit:
                    break
                modes.append(model.training)
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                if step % 2 == 0:
                    evaluate(model)
        """, "GT516", line=22, holds="not all(modes)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
