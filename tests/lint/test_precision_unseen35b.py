"""Shapes that fired wrongly on the projects of docs/triage/unseen35b.md (session 35), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
from typing import Optional
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # R2R-EnvDrop / VLN-HAMT (`agent.py`): `self.loss = 0`, then `self.rollout(...)` (a method
    # of the class) adds the imitation and RL losses into `self.loss`: a tensor reaches the
    # backward. Twin: the method keeps its loss elsewhere: `0.backward()`
    "attribute-loss-filled-by-a-called-method": (Shape("""
        class Agent:
            def __init__(self):
                self.net = nn.Linear(3, 2)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def rollout(self, x):
                ml_loss = self.net(x).pow(2).mean()
                self.loss += ml_loss
            def train(self, n):
                for _ in range(n):
                    self.opt.zero_grad()
                    self.loss = 0
                    self.rollout(torch.randn(4, 3))
                    self.loss.backward()
                    self.opt.step()
        agent = Agent()
        agent.train(2)
        """, "GT101", holds="agent.net.weight.grad is not None"), Shape("""
        class Agent:
            def __init__(self):
                self.net = nn.Linear(3, 2)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def rollout(self, x):
                self.last = self.net(x).pow(2).mean()
            def train(self, n):
                for _ in range(n):
                    self.opt.zero_grad()
                    self.loss = 0
                    self.rollout(torch.randn(4, 3))
                    self.loss.backward()
                    self.opt.step()
        agent = Agent()
        agent.train(2)
        """, "GT101", line=10, raises=(AttributeError, "has no attribute 'backward'"))),
    # LLMRec (`MMSSL/main.py`): Gumbel noise from `torch.empty(...).uniform_(0, 1)` added to a
    # data matrix, softmaxed, then `+=` in place: the softmax's input has no history (an
    # in-place random fill returns its receiver, a new leaf), so nothing saved is read by
    # backward. Twin: the softmax of the model's scores: backward raises
    "softmax-of-data-and-uniform-noise-written-in-place": (Shape("""
        disc = nn.Linear(5, 1)
        scores = torch.rand(4, 5)
        noise = torch.empty(4, 5).uniform_(0, 1)
        soft = F.softmax((scores - torch.log(-torch.log(noise + 1e-8) + 1e-8)) / 0.5, dim=1)
        soft += 0.1
        loss = -disc(soft).mean()
        loss.backward()
        """, "GT602", holds="disc.weight.grad is not None"), Shape("""
        gen, disc = nn.Linear(5, 5), nn.Linear(5, 1)
        noise = torch.empty(4, 5).uniform_(0, 1)
        soft = F.softmax(gen(torch.randn(4, 5)) - torch.log(-torch.log(noise + 1e-8)), dim=1)
        soft += 0.1
        loss = -disc(soft).mean()
        loss.backward()
        """, "GT602", line=4, raises=(RuntimeError, "modified by an inplace operation"))),
    # Bert-VITS2 (`train_ms.py` with `commons.slice_segments`): the waveform batch is sliced
    # with the generator's slice starts through `torch.gather(x, 2, idx)`: the index carries
    # no graph, so the sliced waveform has none and the discriminator's backward frees nothing
    # the generator loss reads. Twin: the helper slices the generator's output itself before
    # the discriminator's step: the generator loss backwards through a freed graph
    "waveform-sliced-by-gather-with-the-generators-indices": (Shape("""
        import sys
        import types
        class _Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 4)
            def forward(self, x):
                ids = torch.randint(0, 4, (x.size(0),))
                return self.fc(x).unsqueeze(1), ids
        sys.modules["vits_models"] = types.SimpleNamespace(SynthesizerTrn=_Gen)
        from vits_models import SynthesizerTrn
        def slice_segments(x, ids_str, size):
            idx = ids_str.view(x.size(0), 1, 1).repeat(1, x.size(1), 1) + torch.arange(size)
            return torch.gather(x, 2, idx)
        net_g, net_d = SynthesizerTrn(), nn.Linear(4, 1)
        opt_g = torch.optim.SGD(net_g.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(net_d.parameters(), lr=0.1)
        for _ in range(2):
            x, y = torch.randn(3, 8), torch.randn(3, 1, 8)
            y_hat, ids_slice = net_g(x)
            y = slice_segments(y, ids_slice, 4)
            loss_d = (net_d(y) - net_d(y_hat.detach())).pow(2).mean()
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            loss_g = (net_d(y) - net_d(y_hat)).pow(2).mean()
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
        """, "GT509", holds="net_g.fc.weight.grad is not None"), Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
            def forward(self, x):
                ids = torch.randint(0, 4, (x.size(0),))
                return self.fc(x).unsqueeze(1), ids
        def slice_segments(x, ids_str, size):
            idx = ids_str.view(x.size(0), 1, 1).repeat(1, x.size(1), 1) + torch.arange(size)
            return torch.gather(x, 2, idx)
        net_g, net_d = Gen(), nn.Linear(4, 1)
        opt_g = torch.optim.SGD(net_g.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(net_d.parameters(), lr=0.1)
        for _ in range(2):
            x = torch.randn(3, 8)
            y_hat, ids_slice = net_g(x)
            y = slice_segments(y_hat, ids_slice, 4)
            loss_d = net_d(y).pow(2).mean()
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            loss_g = (net_d(y) - 1).pow(2).mean()
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
        """, "GT509", line=18, raises=(RuntimeError, "backward through the graph a second"))),
    # (line 18: the discriminator's read of the generator's output, where the detach belongs,
    # since ho32: opt_d steps only net_d)
    # boltz (`loss/confidence.py`): pairwise distances of predicted atoms, `sqrt` of a sum of
    # squares with zeros on the diagonal, read only through `torch.sort(...).indices` to pick
    # neighbours: no gradient runs through the sqrt. Twin: the distances summed into the loss:
    # NaN gradients from the diagonal
    "pairwise-distances-read-only-for-their-order": (Shape("""
        net = nn.Linear(3, 3)
        pts = net(torch.randn(5, 3))
        dist = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1) ** 0.5
        order = torch.sort(dist, dim=1).indices
        nearest = torch.gather(pts, 0, order[:, 1:2].expand(-1, 3))
        loss = (pts - nearest).pow(2).sum()
        loss.backward()
        """, "GT753", holds="not torch.isnan(net.weight.grad).any()"), Shape("""
        net = nn.Linear(3, 3)
        pts = net(torch.randn(5, 3))
        dist = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1) ** 0.5
        loss = dist.sum()
        loss.backward()
        """, "GT753", line=3, holds="torch.isnan(net.weight.grad).any()")),
    # boltz (`loss/validation.py`): `factored_lddt_loss`, an lDDT metric (a fraction of
    # distances within thresholds), handed the predicted coordinates only in the
    # LightningModule's `validation_step`, which Lightning runs with grad off: no loss. Twin:
    # the same metric returned by `training_step`: Lightning's backward raises
    "threshold-metric-named-loss-called-in-validation-step": (Shape("""
        import pytorch_lightning as pl
        def lddt_loss(pred, true):
            err = (torch.cdist(pred, pred) - torch.cdist(true, true)).abs()
            return (err < 0.5).float().mean()
        class Folder(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
            def training_step(self, batch, i):
                x, y = batch
                return (self.fc(x) - y).pow(2).mean()
            def validation_step(self, batch, i):
                x, y = batch
                score = lddt_loss(self.fc(x), y)
                return score
        model = Folder()
        batch = (torch.randn(6, 3), torch.randn(6, 3))
        model.training_step(batch, 0).backward()
        with torch.no_grad():
            score = model.validation_step(batch, 0)
        """, "GT108", holds="model.fc.weight.grad is not None and 0 <= score <= 1"), Shape("""
        import pytorch_lightning as pl
        def lddt_loss(pred, true):
            err = (torch.cdist(pred, pred) - torch.cdist(true, true)).abs()
            return (err < 0.5).float().mean()
        class Folder(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
            def training_step(self, batch, i):
                x, y = batch
                return lddt_loss(self.fc(x), y)
        model = Folder()
        model.training_step((torch.randn(6, 3), torch.randn(6, 3)), 0).backward()
        """, "GT108", line=4, raises=(RuntimeError, "does not require grad"))),
    # LightZero (`policy/stochastic_muzero.py`, `unizero.py`): `self._learn_model =
    # self._model` in the set-up method; the optimizer is built over `self._model` and the
    # clip names `self._learn_model`: one module, two names. Twin: the clip of another
    # module's parameters: the stepped model's gradients are applied unclipped
    "clip-through-a-second-name-of-the-stepped-model": (Shape("""
        class Policy:
            def __init__(self):
                self._model = nn.Linear(3, 1)
                self._init_learn()
            def _init_learn(self):
                self._optimizer = torch.optim.SGD(self._model.parameters(), lr=0.1)
                self._learn_model = self._model
            def learn(self, x):
                loss = self._learn_model(x).pow(2).mean() * 1e4
                self._optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self._learn_model.parameters(), 1.0)
                self._optimizer.step()
        p = Policy()
        p.learn(torch.randn(4, 3))
        """, "GT549", holds="float(torch.cat([g.grad.flatten() for g in p._model.parameters()])"
                            ".norm()) <= 1.0 + 1e-4"), Shape("""
        class Policy:
            def __init__(self):
                self._model = nn.Linear(3, 1)
                self._init_learn()
            def _init_learn(self):
                self._optimizer = torch.optim.SGD(self._model.parameters(), lr=0.1)
                self._target_model = nn.Linear(3, 1)
            def learn(self, x):
                loss = self._model(x).pow(2).mean() * 1e4
                self._optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self._target_model.parameters(), 1.0)
                self._optimizer.step()
        p = Policy()
        p.learn(torch.randn(4, 3))
        """, "GT549", line=12, holds="float(torch.cat([g.grad.flatten() for g in "
                                     "p._model.parameters()]).norm()) > 1.0")),
    # scaleformer (`models/FiLM.py`): `stdev = torch.sqrt(torch.var(x, 1, ...) + 1e-5).detach()`
    # then `x /= stdev`: the variance saved `x`, but its result leaves the graph at the
    # `.detach()`, so backward never runs it. Twin: the statistics kept on the graph
    "in-place-normalisation-by-a-detached-statistic": (Shape("""
        net = nn.Linear(4, 4)
        x = net(torch.randn(3, 4))
        x = x - x.mean(1, keepdim=True).detach()
        stdev = torch.sqrt(torch.var(x, dim=1, keepdim=True, unbiased=False) + 1e-5).detach()
        x /= stdev
        x.sum().backward()
        """, "GT605", holds="net.weight.grad is not None"), Shape("""
        net = nn.Linear(4, 4)
        x = net(torch.randn(3, 4))
        stdev = torch.sqrt(torch.var(x, dim=1, keepdim=True, unbiased=False) + 1e-5)
        x /= stdev
        x.sum().backward()
        """, "GT605", line=4, raises=(RuntimeError, "modified by an inplace operation"))),
    # LightZero (`unizero_world_models/slicer.py`, from IRIS): a plain list of `Slicer`
    # modules, which hold only index tensors and numbers (`block_mask.sum().long().item()`):
    # nothing of theirs is registered either way. Twin: the listed module owns a layer:
    # `parameters()` misses it
    "plain-list-of-index-only-modules": (Shape("""
        class Slicer(nn.Module):
            def __init__(self, max_blocks, block_mask):
                super().__init__()
                self.block_size = block_mask.size(0)
                self.kept = block_mask.sum().long().item()
                self.indices = torch.where(block_mask)[0].repeat(max_blocks)
        class Embedder(nn.Module):
            def __init__(self, masks):
                super().__init__()
                self.slicers = [Slicer(2, m) for m in masks]
                self.table = nn.Embedding(10, 4)
            def forward(self, tokens):
                return self.table(tokens[:, self.slicers[0].indices])
        emb = Embedder([torch.tensor([True, False, True])])
        emb(torch.randint(0, 10, (2, 6))).sum().backward()
        """, "GT401", holds="len(list(emb.parameters())) == 1"), Shape("""
        class Slicer(nn.Module):
            def __init__(self, max_blocks, block_mask):
                super().__init__()
                self.kept = block_mask.sum().long().item()
                self.proj = nn.Linear(4, 4)
        class Embedder(nn.Module):
            def __init__(self, masks):
                super().__init__()
                self.slicers = [Slicer(2, m) for m in masks]
        emb = Embedder([torch.tensor([True, False, True])])
        """, "GT401", line=9, holds="len(list(emb.parameters())) == 0")),
    # deep-daze (`deep_daze.py`): `train_step` makes `total_loss = 0`, sums each micro-batch's
    # loss over `range(self.gradient_accumulate_every)` (backwarding each) and steps once after
    # the loop: one update's graphs, made anew by the next call, read by the caller as
    # `.item()`. Twin: the step inside the loop over the data: every step's graph is kept
    "micro-batch-losses-summed-within-one-update": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def train_step(accumulate=4):
            total_loss = 0
            for _ in range(accumulate):
                loss = net(torch.randn(2, 3)).pow(2).mean() / accumulate
                total_loss += loss
                loss.backward()
            opt.step()
            opt.zero_grad()
            return total_loss
        for i in range(3):
            shown = train_step().item()
        """, "GT505", holds="isinstance(shown, float)"), Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def train_epoch(batches):
            total_loss = 0
            for x in batches:
                loss = net(x).pow(2).mean()
                total_loss += loss
                loss.backward()
                opt.step()
                opt.zero_grad()
            return total_loss
        total = train_epoch([torch.randn(2, 3) for _ in range(4)])
        """, "GT505", line=7, holds="total.grad_fn is not None")),
    # self-rewarding-lm-pytorch (`dpo.py`): `forward(self, train_self_reward_dataset:
    # Optional[Dataset] = None)` rebinds the parameter to what its dataset generator (an
    # `nn.Module`) returns, then batches it with a `DataLoader`: a dataset by its declaration,
    # no graph. Twin: a tensor parameter given an encoder's output before the loop
    "dataset-parameter-rebound-to-a-generators-result": (Shape("""
        import itertools
        class Gen(nn.Module):
            def forward(self):
                return TensorDataset(torch.randn(8, 3), torch.randn(8, 1))
        class Trainer(nn.Module):
            def __init__(self, dataset_generator):
                super().__init__()
                self.model = nn.Linear(3, 1)
                self.dataset_generator = dataset_generator
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def forward(self, train_dataset: Optional[Dataset] = None):
                train_dataset = self.dataset_generator()
                batches = itertools.cycle(DataLoader(train_dataset, batch_size=4))
                for _ in range(3):
                    x, y = next(batches)
                    loss = (self.model(x) - y).pow(2).mean()
                    loss.backward()
                    self.opt.step()
                    self.opt.zero_grad()
        t = Trainer(Gen())
        before = t.model.weight.detach().clone()
        t()
        """, "GT507", holds="not torch.equal(before, t.model.weight)"), Shape("""
        class Trainer(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Linear(3, 1)
                self.encoder = nn.Linear(3, 3)
                self.opt = torch.optim.SGD(self.parameters(), lr=0.1)
            def forward(self, feats: Optional[torch.Tensor] = None):
                feats = self.encoder(torch.randn(4, 3))
                for _ in range(2):
                    loss = self.model(feats).pow(2).mean()
                    loss.backward()
                    self.opt.step()
                    self.opt.zero_grad()
        t = Trainer()
        t()
        """, "GT507", line=8, raises=(RuntimeError, "backward through the graph a second"))),
    # curiosity-driven-exploration-pytorch (`model.py`): `self.residual = [nn.Sequential(...)
    # .to(self.device)] * 8`: GT446 said the eight blocks are one; the list is also plain, so
    # that block is in no `parameters()` and never trains (GT401 read neither the list
    # multiplication nor the `.to()` a module returns itself from). Look-alike: the repeated
    # element owns no parameter, the trained blocks are in an `nn.ModuleList`
    "repeated-block-in-a-plain-list-moved-to-a-device": (Shape("""
        class ICM(nn.Module):
            def __init__(self):
                super().__init__()
                self.acts = [nn.LeakyReLU().to("cpu")] * 2
                self.blocks = nn.ModuleList([nn.Linear(4, 4).to("cpu") for _ in range(2)])
            def forward(self, x):
                for act, block in zip(self.acts, self.blocks):
                    x = act(block(x))
                return x
        icm = ICM()
        icm(torch.randn(2, 4)).sum().backward()
        """, "GT401", holds="len(list(icm.parameters())) == 4"), Shape("""
        class ICM(nn.Module):
            def __init__(self):
                super().__init__()
                self.residual = [nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU()).to("cpu")] * 2
            def forward(self, x):
                for block in self.residual:
                    x = block(x) + x
                return x
        icm = ICM()
        """, "GT401", line=4, holds="len(list(icm.parameters())) == 0")),
    # LMFlow (`pipeline/inferencer.py`): the model wrapper's `decode(ids,
    # skip_special_tokens=True)` is its tokenizer's (a keyword only a tokenizer's decode takes):
    # the loop collects strings. Twin: a VAE's `decode(z)` collected with grad on: every
    # output keeps its graph
    "text-decoded-by-a-model-wrapper-collected": (Shape("""
        import sys
        import types
        class _LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 7)
            def inference(self, ids):
                return self.head(F.one_hot(ids, 4).float()).argmax(-1)
            def decode(self, ids, skip_special_tokens=False):
                return "".join("abcdefg"[int(i)] for i in ids)
        sys.modules["llm_models"] = types.SimpleNamespace(AutoModel=_LM)
        from llm_models import AutoModel
        def inference(model, dataloader):
            output_dict = {"instances": []}
            for batch in dataloader:
                outputs = model.inference(batch[0])
                text_out = model.decode(outputs[0], skip_special_tokens=True)
                output_dict["instances"].append({"text": text_out})
            return output_dict
        ids = TensorDataset(torch.randint(0, 4, (3, 5)))
        output_dict = inference(AutoModel(), DataLoader(ids, batch_size=1))
        """, "GT505", holds="all(isinstance(i['text'], str) for i in output_dict['instances'])"),
        Shape("""
        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.dec = nn.Linear(2, 4)
            def decode(self, z):
                return self.dec(z)
        def sample(vae, dataloader):
            samples = []
            for batch in dataloader:
                samples.append(vae.decode(batch[0]))
            return samples
        samples = sample(VAE(), DataLoader(TensorDataset(torch.randn(3, 2)), batch_size=1))
        """, "GT505", line=10, holds="samples[0].grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
