"""Shapes that fired wrongly on the projects of docs/triage/unseen38a.md (session 38), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # PyLaia (`laia/models/htr/gated_crnn.py`, RNNDecoder): `x = self.rnn(x)` on a packed batch,
    # then `if isinstance(x, PackedSequence): x = x.data`: the packed tensor field of the
    # PackedSequence, with its history, not `Tensor.data`. Twin: the recurrent layer's padded
    # output tensor read through `.data`: the layer gets no gradient
    "data-field-of-a-packed-sequence": (Shape("""
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(4, 6)
                self.linear = nn.Linear(6, 3)
            def forward(self, x):
                x, _ = self.rnn(x)
                if isinstance(x, PackedSequence):
                    x = x.data
                x = self.linear(x)
                return x
        m = Decoder()
        packed = pack_padded_sequence(torch.randn(5, 2, 4), [5, 3])
        m(packed).pow(2).mean().backward()
        """, "GT105", holds="m.rnn.weight_ih_l0.grad is not None"), Shape("""
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(4, 6)
                self.linear = nn.Linear(6, 3)
            def forward(self, x):
                x, _ = self.rnn(x)
                if isinstance(x, torch.Tensor):
                    x = x.data
                x = self.linear(x)
                return x
        m = Decoder()
        m(torch.randn(5, 2, 4)).pow(2).mean().backward()
        """, "GT105", line=9, holds="m.rnn.weight_ih_l0.grad is None")),
    # OpenHGNN (`trainerflow/FED_REC_trainer.py`): `self.user_emb.weight.data =
    # Parameter(torch.Tensor(features)).to(self.device)`: the copy becomes the new data of the
    # embedding's registered weight, which stays a Parameter. Twin: the cast copy kept on an
    # attribute of its own is no Parameter, never registered nor trained
    "moved-parameter-assigned-to-data": (Shape("""
        class Rec(nn.Module):
            def __init__(self, table):
                super().__init__()
                self.emb = nn.Embedding(*table.shape)
                self.emb.weight.data = nn.Parameter(torch.as_tensor(table)).double()
            def forward(self, idx):
                return self.emb(idx).sum()
        m = Rec(torch.randn(6, 3))
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        before = m.emb.weight.detach().clone()
        m(torch.tensor([1, 2])).backward()
        opt.step()
        """, "GT403", holds="not torch.equal(before, m.emb.weight)"), Shape("""
        class Rec(nn.Module):
            def __init__(self, table):
                super().__init__()
                self.emb = nn.Embedding(*table.shape)
                self.table = nn.Parameter(torch.as_tensor(table)).double()
            def forward(self, idx):
                return self.table[idx].sum()
        m = Rec(torch.randn(6, 3))
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        before = m.table.detach().clone()
        m(torch.tensor([1, 2])).backward()
        """, "GT403", line=5, holds="'table' not in dict(m.named_parameters()) and m.table.grad is None")),
    # scBERT (`performer_pytorch.py`, PerformerLM.forward): `x = self.token_emb(x)`, then
    # `x.requires_grad_()` when attention maps are asked for, then `x += self.pos_emb(x)`: the
    # output of a layer that owns parameters has history with grad on (the write is recorded),
    # and under `no_grad` an in-place write to a leaf is allowed. Twin: the embedding detached
    # first is a leaf; flagged, it refuses the in-place write
    "requires-grad-flag-on-a-layer-output": (Shape("""
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.token_emb = nn.Embedding(10, 4)
                self.pos = nn.Parameter(torch.zeros(4))
                self.head = nn.Linear(4, 10)
            def forward(self, ids, maps=False):
                x = self.token_emb(ids)
                if maps:
                    x.requires_grad_()
                x += self.pos
                return self.head(x)
        m = LM()
        ids = torch.tensor([1, 2, 3])
        F.cross_entropy(m(ids, maps=True), ids).backward()
        with torch.no_grad():
            m(ids, maps=True)
        """, "GT302", holds="m.token_emb.weight.grad is not None"), Shape("""
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.token_emb = nn.Embedding(10, 4)
                self.pos = nn.Parameter(torch.zeros(4))
                self.head = nn.Linear(4, 10)
            def forward(self, ids, maps=False):
                x = self.token_emb(ids).detach()
                if maps:
                    x.requires_grad_()
                x += self.pos
                return self.head(x)
        m = LM()
        ids = torch.tensor([1, 2, 3])
        F.cross_entropy(m(ids, maps=True), ids).backward()
        """, "GT302", line=11, raises=(RuntimeError, "leaf Variable that requires grad"))),
    # r2c (`models/train.py`): `for submodule in model.detector.backbone.modules(): if
    # isinstance(submodule, BatchNorm2d): submodule.track_running_stats = False`, then every
    # parameter of each submodule frozen, then `model.train()`: a norm layer that stops
    # tracking writes nothing into its running buffers. Twin: the loop only lowers the
    # momentum: `model.train()` still moves the frozen part's statistics
    "frozen-part-whose-norm-layers-stop-tracking": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.backbone(x).mean((2, 3)))
        model = Net()
        for sub in model.backbone.modules():
            if isinstance(sub, nn.BatchNorm2d):
                sub.track_running_stats = False
            for p in sub.parameters():
                p.requires_grad = False
        model.train()
        before = model.backbone[1].running_mean.clone()
        model(torch.randn(2, 3, 6, 6)).sum().backward()
        """, "GT461", holds="torch.equal(before, model.backbone[1].running_mean)"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.backbone(x).mean((2, 3)))
        model = Net()
        for sub in model.backbone.modules():
            if isinstance(sub, nn.BatchNorm2d):
                sub.momentum = 0.01
            for p in sub.parameters():
                p.requires_grad = False
        model.train()
        before = model.backbone[1].running_mean.clone()
        model(torch.randn(2, 3, 6, 6)).sum().backward()
        """, "GT461", line=13, holds="not torch.equal(before, model.backbone[1].running_mean)")),
    # synthcity (`time_to_event/tte_date.py`, TimeEventGAN): `_train` checks the generator
    # under `no_grad` with `self.generate(X)`, which runs `self(X)`, whose `forward` calls
    # `self.generator.eval()` before running it: the module chooses its own mode. Twin: the
    # same `forward` without the switch: the evaluation moves the running statistics
    "forward-that-puts-what-it-runs-in-eval-mode": (Shape("""
        class TTE(nn.Module):
            def __init__(self):
                super().__init__()
                self.generator = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
                self.opt = torch.optim.SGD(self.generator.parameters(), lr=0.1)
            def generate(self, x):
                return self(x).numpy()
            def forward(self, x):
                self.generator.eval()
                with torch.no_grad():
                    return self.generator(x)
            def _epoch(self, batches):
                self.generator.train()
                for x, y in batches:
                    self.opt.zero_grad()
                    F.mse_loss(self.generator(x), y).backward()
                    self.opt.step()
            def fit(self, batches, val):
                for _ in range(2):
                    self._epoch(batches)
                    with torch.no_grad():
                        pred = self.generate(val)
                return pred
        m = TTE()
        val = torch.randn(8, 4)
        m.fit([(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)], val)
        before = m.generator[1].running_mean.clone()
        m.generate(val)
        """, "GT540", holds="torch.equal(before, m.generator[1].running_mean)"), Shape("""
        class TTE(nn.Module):
            def __init__(self):
                super().__init__()
                self.generator = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
                self.opt = torch.optim.SGD(self.generator.parameters(), lr=0.1)
            def generate(self, x):
                return self(x).numpy()
            def forward(self, x):
                with torch.no_grad():
                    return self.generator(x)
            def _epoch(self, batches):
                self.generator.train()
                for x, y in batches:
                    self.opt.zero_grad()
                    F.mse_loss(self.generator(x), y).backward()
                    self.opt.step()
            def fit(self, batches, val):
                for _ in range(2):
                    self._epoch(batches)
                    with torch.no_grad():
                        pred = self.generate(val)
                return pred
        m = TTE()
        val = torch.randn(8, 4)
        m.fit([(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)], val)
        before = m.generator[1].running_mean.clone()
        m.generate(val)
        """, "GT540", line=21, holds="not torch.equal(before, m.generator[1].running_mean)")),
    # OpenHGNN (`trainerflow/BPHGNN_trainer.py`): the loss reads labels rebuilt from a loaded
    # array (`torch.FloatTensor(labels[np.newaxis])`, no graph ever) and embeddings rebuilt
    # from the model's output (`torch.tensor(embeds[np.newaxis])`): the model is cut at the
    # second, and the finding must say so (first contact named the labels' line). Look-alike:
    # the labels rebuilt the same way, the embeddings read live: silent, the model trains
    "labels-rebuilt-from-an-array-beside-the-model-cut": (Shape("""
        import pickle
        import numpy as np
        class LogReg(nn.Module):
            def __init__(self, a, b):
                super().__init__()
                self.fc = nn.Linear(a, b)
            def forward(self, x):
                return self.fc(x)
        class Trainer:
            def __init__(self, model, feature, blob):
                self.model = model
                self.feature = feature
                self.blob = blob
            def train(self):
                embeds = self.model(self.feature)
                labels, idx_train = pickle.loads(self.blob)
                labels = labels.astype(np.int16)
                labels = torch.FloatTensor(labels[np.newaxis])
                train_lbls = torch.argmax(labels[0, idx_train], dim=1)
                log = LogReg(8, 3)
                opt = torch.optim.Adam([{"params": self.model.parameters()}, {"params": log.parameters()}])
                for it in range(2):
                    embeds = self.model(self.feature)
                    embeds = embeds[None]
                    train_embs = embeds[0, idx_train]
                    opt.zero_grad()
                    logits = log(train_embs)
                    loss = nn.CrossEntropyLoss()(logits, train_lbls)
                    loss.backward()
                    opt.step()
        t = Trainer(nn.Linear(4, 8), torch.randn(6, 4),
                    pickle.dumps((np.eye(3)[[0, 1, 2, 0, 1, 2]], torch.tensor([0, 1, 2]))))
        t.train()
        """, "GT109", holds="t.model.weight.grad is not None"), Shape("""
        import pickle
        import numpy as np
        class LogReg(nn.Module):
            def __init__(self, a, b):
                super().__init__()
                self.fc = nn.Linear(a, b)
            def forward(self, x):
                return self.fc(x)
        class Trainer:
            def __init__(self, model, feature, blob):
                self.model = model
                self.feature = feature
                self.blob = blob
            def train(self):
                embeds = self.model(self.feature)
                labels, idx_train = pickle.loads(self.blob)
                labels = labels.astype(np.int16)
                labels = torch.FloatTensor(labels[np.newaxis])
                train_lbls = torch.argmax(labels[0, idx_train], dim=1)
                log = LogReg(8, 3)
                opt = torch.optim.Adam([{"params": self.model.parameters()}, {"params": log.parameters()}])
                for it in range(2):
                    embeds = self.model(self.feature)
                    embeds = torch.tensor(embeds[np.newaxis], dtype=torch.float32)
                    train_embs = embeds[0, idx_train]
                    opt.zero_grad()
                    logits = log(train_embs)
                    loss = nn.CrossEntropyLoss()(logits, train_lbls)
                    loss.backward()
                    opt.step()
        t = Trainer(nn.Linear(4, 8), torch.randn(6, 4),
                    pickle.dumps((np.eye(3)[[0, 1, 2, 0, 1, 2]], torch.tensor([0, 1, 2]))))
        t.train()
        """, "GT109", line=24, holds="t.model.weight.grad is None")),
    # WavLLM (`wavllm/models/wavlm.py`): `initial_weights = torch.ones(13, requires_grad=True)
    # .float()`, then `self.output_weights = nn.Parameter(initial_weights).to(self.projector.
    # weight)` in `__init__`, with `self.projector = nn.Linear(1024, 2048)` built just before: the
    # move asks for the CPU and float32, what the tensor has, and returns the Parameter itself.
    # Twin: the layer was cast to float64 first: the move casts, a plain copy, unregistered
    "move-to-the-weight-of-a-layer-just-built": (Shape("""
        class Mix(nn.Module):
            def __init__(self):
                super().__init__()
                self.projector = nn.Linear(4, 2)
                start = torch.ones(3, requires_grad=True).float()
                self.weights = nn.Parameter(start).to(self.projector.weight)
            def forward(self, hs):
                return self.projector((self.weights.softmax(0)[:, None, None] * hs).sum(0))
        m = Mix()
        m(torch.randn(3, 5, 4)).sum().backward()
        """, "GT403", holds="'weights' in dict(m.named_parameters()) and m.weights.grad is not None"), Shape("""
        class Mix(nn.Module):
            def __init__(self):
                super().__init__()
                self.projector = nn.Linear(4, 2).double()
                start = torch.ones(3, requires_grad=True).float()
                self.weights = nn.Parameter(start).to(self.projector.weight)
            def forward(self, hs):
                return self.projector((self.weights.softmax(0)[:, None, None] * hs).sum(0))
        m = Mix()
        m(torch.randn(3, 5, 4, dtype=torch.float64)).sum().backward()
        """, "GT403", line=6, holds="'weights' not in dict(m.named_parameters())")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_indexed_write_into_an_expand_says_when_it_raises() -> None:
    """VQA_ReGAT (`model/relation_encoder.py`): `q_expand[idx[:, 0], idx[:, 1]] = 0` into
    `q.expand(-1, n, -1)` does not raise at the write (a deprecation warning); it zeroes the
    whole broadcast row, and the backward raises. The message says so, not 'this statement
    raises'; a whole-tensor write (`clamp_`) still raises at once."""
    import textwrap

    from gradtrace.lint import check_source

    src = PRELUDE + textwrap.dedent("""
        def q_expand_v_cat(q, v):
            q_expand = q.view(q.size(0), 1, q.size(1)).expand(-1, v.shape[1], -1)
            idx = torch.nonzero(v.sum(-1) == 0)
            q_expand[idx[:, 0], idx[:, 1]] = 0
            return torch.cat((v, q_expand), dim=-1)
        q = torch.randn(2, 3, requires_grad=True)
        v = torch.randn(2, 4, 3)
        v[0, 1] = 0
        out = q_expand_v_cat(q * 1, v)
        zeroed_row = bool((out[0, :, 3:] == 0).all())
        """).lstrip("\n")
    found = check_source(src, "shape.py", select=["GT619"])
    assert [(f.line - PRELUDE.count("\n"), f.code) for f in found] == [(4, "GT619")]
    assert "writes it by index" in found[0].message and "backward raises" in found[0].message
    env: dict = {}
    exec(compile(src, "shape.py", "exec"), env)
    assert env["zeroed_row"]  # the write reached every object of the first question
    with pytest.raises(RuntimeError, match="single memory location"):
        env["out"].sum().backward()
    whole = check_source(PRELUDE + "m = torch.ones(3).view(1, 3).expand(3, 3)\nm.clamp_(min=0.5)\n",
                         "shape.py", select=["GT619"])
    assert len(whole) == 1 and "raises `RuntimeError" in whole[0].message \
        and "by index" not in whole[0].message
