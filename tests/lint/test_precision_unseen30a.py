"""Shapes that fired wrongly on the projects of docs/triage/unseen30a.md (session 30), each in
another spelling than the project's and next to a buggy twin that is still reported. The
snippets run on real torch (the one of another framework is checked only: that framework is
not installed here)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Mantis (mantis/models/openflamingo/flamingo_lm.py): `FlamingoLMMixin(nn.Module)` has no
    # `__init__`; its layers are built in the public `init_flamingo`, which another file calls
    # after grafting the mixin onto a language model (`extend_instance`). The file never builds
    # the class. Here the grafting is in the file and the call in `holds` (the other file).
    # Twin: the file builds the class itself and never calls the method
    "public-builder-of-a-mixin-another-file-grafts": (Shape("""
        class AdapterMixin(nn.Module):
            def init_adapter(self, d):
                self.adapter = nn.Linear(d, d)
            def forward(self, x):
                return self.adapter(x)
        def extend_instance(obj, mixin):
            obj.__class__ = type(mixin.__name__, (mixin, obj.__class__), {})
            return obj
        class Base(nn.Module):
            pass
        m = extend_instance(Base(), AdapterMixin)
        """, "GT444", holds="[m.init_adapter(4), m(torch.randn(2, 4)).sum().backward(), "
           "m.adapter.weight.grad is not None][-1]"), Shape("""
        class Adapter(nn.Module):
            def init_adapter(self, d):
                self.adapter = nn.Linear(d, d)
            def forward(self, x):
                return self.adapter(x)
        m = Adapter()
        m(torch.randn(2, 4))
        """, "GT444", line=2, raises=(AttributeError, "adapter"))),
    # hart (var_quantize_multiple_res.py), VAR's multi-scale VQ written with `x = x + ...`:
    # in the loop over scales `f_hat = f_hat + h` and `loss = loss + mse(f_hat.data, f) *
    # beta + mse(f_hat, f_ng)`: the `.data` is the stop-gradient of the commitment term, the
    # codebook trains through the second term of the same statement; the loop rebinds `f_hat`
    # from itself, never from what the loss statement makes. Twin: the loop feeds the cut
    # value back as the next pass's state (a recurrent cut): only the last pass trains `cell`
    "commitment-target-cut-in-a-loop-over-scales": (Shape("""
        class Quant(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(8, 4)
                self.enc = nn.Linear(4, 4)
            def forward(self, x):
                f = self.enc(x)
                f_ng = f.detach()
                f_hat = torch.zeros_like(f)
                loss = 0.0
                for si in range(2):
                    idx = torch.cdist(f_ng, self.embedding.weight.data).argmin(1)
                    f_hat = f_hat + self.embedding(idx)
                    loss = loss + F.mse_loss(f_hat.data, f) * 0.25 + F.mse_loss(f_hat, f_ng)
                return (f_hat.data - f_ng) + f, loss
        q = Quant()
        out, loss = q(torch.randn(3, 4))
        (out.sum() + loss).backward()
        """, "GT105", holds="q.embedding.weight.grad.abs().sum() > 0 "
           "and q.enc.weight.grad.abs().sum() > 0"), Shape("""
        class Rec(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.Linear(4, 4)
            def forward(self, xs):
                h = torch.zeros(2, 4)
                for x in xs:
                    out = torch.tanh(self.cell(x) + h.data)
                    h = out
                return h
        r = Rec()
        r(torch.randn(3, 2, 4)).sum().backward()
        """, "GT105", line=8, holds="r.cell.weight.grad is not None")),
    # AudioLDM-training-finetuning (sequence_gen/model.py): `self.cond_stage_models =
    # nn.ModuleList([])`, filled in a method with `instantiate_from_config(cfg)` (conditioners
    # another file's classes build and freeze); the groups list the GPT-2 and a projection.
    # Twin: the empty list is filled with layers built here, trained by `forward`, never stepped
    "empty-module-list-filled-by-a-factory": (Shape("""
        def instantiate(cfg):
            m = nn.Linear(4, 4)
            m.requires_grad_(False)
            return m
        class Gen(nn.Module):
            def __init__(self, cfgs):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 4)
                self.conds = nn.ModuleList([])
                self.build(cfgs)
            def build(self, cfgs):
                for c in cfgs:
                    model = instantiate(c)
                    self.conds.append(model)
            def forward(self, x):
                return self.body(self.proj(x) + self.conds[0](x))
            def optimizer(self):
                return torch.optim.SGD([{"params": self.body.parameters()},
                                        {"params": self.proj.parameters()}], lr=0.1)
        g = Gen([None])
        opt = g.optimizer()
        g(torch.randn(2, 4)).pow(2).sum().backward()
        opt.step()
        """, "GT462", holds="g.conds[0].weight.grad is None"), Shape("""
        class Gen(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 4)
                self.conds = nn.ModuleList([])
                for _ in range(n):
                    self.conds.append(nn.Linear(4, 4))
            def forward(self, x):
                return self.body(self.proj(x) + self.conds[0](x))
            def optimizer(self):
                return torch.optim.SGD([{"params": self.body.parameters()},
                                        {"params": self.proj.parameters()}], lr=0.1)
        g = Gen(1)
        before = g.conds[0].weight.detach().clone()
        opt = g.optimizer()
        g(torch.randn(2, 4)).pow(2).sum().backward()
        opt.step()
        """, "GT462", line=12, holds="g.conds[0].weight.grad is not None "
           "and torch.equal(g.conds[0].weight, before)")),
    # moshi (moshi/quantization/core_vq.py): `_compute_entropy(usage)`, whose only call in the
    # file passes `self.cluster_usage`, a registered buffer: a statistic for the metrics,
    # never differentiated (here with GT753's `sqrt(1 - p ** 2)`, the same tracer fact).
    # Twin: the helper is given a parameter that reaches 1: the gradient is NaN
    "helper-given-only-a-buffer": (Shape("""
        def spread(usage):
            proba = usage / usage.sum()
            return torch.sqrt(1 - proba ** 2).sum()
        class Codebook(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.register_buffer("usage", torch.tensor([0.0, 1.0, 0.0]))
            def forward(self, x):
                return self.lin(x), spread(self.usage)
        cb = Codebook()
        out, metric = cb(torch.randn(2, 3))
        out.sum().backward()
        """, "GT753", holds="not metric.requires_grad and cb.lin.weight.grad is not None"),
        Shape("""
        def spread(usage):
            proba = usage / usage.sum()
            return torch.sqrt(1 - proba ** 2).sum()
        class Codebook(nn.Module):
            def __init__(self):
                super().__init__()
                self.usage = nn.Parameter(torch.tensor([0.0, 1.0, 0.0]))
            def forward(self, x):
                return x * spread(self.usage)
        cb = Codebook()
        cb(torch.randn(2, 3)).sum().backward()
        """, "GT753", line=3, holds="torch.isnan(cb.usage.grad).any()")),
    # UniAudio (tools/evaluation/compute_ms_stft_loss.py): `calculate_ms_stft_loss(args)`
    # appends the STFT loss of each pair of wave files and returns `np.mean(results)`; the
    # script's `__main__` prints it and the file runs no backward: a reported number, whatever
    # the function's name. Twin: the file backpropagates what the function returns
    "loss-named-metric-of-a-script": (Shape("""
        import numpy as np
        def mean_pair_loss(pairs):
            results = [F.mse_loss(a, b).cpu() for a, b in pairs]
            return np.mean(results)
        x = torch.from_numpy(np.random.rand(3, 2).astype("float32"))
        score = mean_pair_loss([(x, x * 2), (x, x + 1)])
        print(f"score {score:.3f}")
        """, "GT103", holds="isinstance(score, np.floating)"), Shape("""
        import numpy as np
        def mean_pair_loss(pairs):
            results = [F.mse_loss(a, b).cpu() for a, b in pairs]
            return np.mean(results)
        net = nn.Linear(2, 2)
        x = torch.randn(3, 2)
        score = mean_pair_loss([(net(x), x * 2), (net(x), x + 1)])
        score.backward()
        """, "GT103", line=4, raises=(RuntimeError, "requires grad"))),
    # Amphion (dualcodec/model_codec/trainer.py), descript-audio-codec's loop: `out =
    # self.model(x)`, `generator_out = out.x`, `gan_loss.discriminator_loss(generator_out, x)`
    # (another file's method, which detaches the fake), its backward and the discriminator's
    # step, then `gan_loss.generator_loss(generator_out, x)`, backward, the generator's step.
    # Twin: the same two methods in a class of this file, whose discriminator loss keeps the
    # fake's graph
    "two-methods-of-a-foreign-gan-loss": (Shape("""
        from tests.lint._sibling_gan_loss import GANLoss
        gen = nn.Linear(2, 2)
        gan_loss = GANLoss()
        opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(gan_loss.disc.parameters(), lr=0.1)
        for _ in range(2):
            x = torch.randn(3, 2)
            out = {"x": gen(x)}
            fake = out["x"]
            disc = gan_loss.discriminator_loss(fake, x)
            opt_d.zero_grad()
            disc.backward()
            opt_d.step()
            adv = gan_loss.generator_loss(fake, x)
            opt_g.zero_grad()
            adv.backward()
            opt_g.step()
        """, "GT509"), Shape("""
        class GANLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.disc = nn.Linear(2, 1)
            def discriminator_loss(self, fake, real):
                return self.disc(fake).mean() - self.disc(real).mean()
            def generator_loss(self, fake, real):
                return (fake - real).abs().mean() - self.disc(fake).mean()
        gen = nn.Linear(2, 2)
        gan_loss = GANLoss()
        opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_d = torch.optim.SGD(gan_loss.disc.parameters(), lr=0.1)
        x = torch.randn(3, 2)
        out = {"x": gen(x)}
        fake = out["x"]
        disc = gan_loss.discriminator_loss(fake, x)
        opt_d.zero_grad()
        disc.backward()
        opt_d.step()
        adv = gan_loss.generator_loss(fake, x)
        opt_g.zero_grad()
        adv.backward()
        opt_g.step()
        """, "GT509", line=20, raises=(RuntimeError, "second time"))),
    # moshi's own spelling of the helper above: `torch.where(proba == 0, 0, proba *
    # torch.log(proba))` on the buffer's distribution (GT751 now asks the same tracer).
    # Twin: the entropy of a parameter with a zero entry: the log's NaN gradient gets through
    "where-over-a-statistic-of-a-buffer": (Shape("""
        def entropy(usage):
            proba = usage / usage.sum()
            p_log_p = torch.where(proba == 0, torch.zeros(()), proba * torch.log(proba))
            return -p_log_p.sum()
        class Codebook(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.register_buffer("usage", torch.tensor([0.0, 1.0, 3.0]))
            def forward(self, x):
                return self.lin(x), entropy(self.usage)
        cb = Codebook()
        out, metric = cb(torch.randn(2, 3))
        out.sum().backward()
        """, "GT751", holds="not metric.requires_grad and cb.lin.weight.grad is not None"),
        Shape("""
        def entropy(usage):
            proba = usage / usage.sum()
            p_log_p = torch.where(proba == 0, torch.zeros(()), proba * torch.log(proba))
            return -p_log_p.sum()
        class Codebook(nn.Module):
            def __init__(self):
                super().__init__()
                self.usage = nn.Parameter(torch.tensor([0.0, 1.0, 3.0]))
            def forward(self, x):
                return x * entropy(self.usage)
        cb = Codebook()
        cb(torch.randn(2, 3)).sum().backward()
        """, "GT751", line=3, holds="torch.isnan(cb.usage.grad).any()")),
    # smoothing-adversarial (code/attacks.py, left from unseen29c): an attack's zero-order
    # (Stein) estimate of the gradient of the smoothed probability, `F.nll_loss(F.softmax(
    # logits), y, reduction='none') * noise`, averaged and added to the perturbation: nothing
    # differentiates it, nothing minimises `-p`. Twin: the same pairing backpropagated
    "zero-order-estimate-written-with-a-loss": (Shape("""
        def attack_step(model, x, y, delta, noise, lr=0.1):
            logits = model(x + delta + noise)
            est = F.nll_loss(F.softmax(logits, dim=1), y, reduction="none")[:, None] * noise
            est = est / est.norm(dim=1, keepdim=True)
            return delta + lr * est
        net = nn.Linear(4, 3)
        x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
        delta = attack_step(net, x, y, torch.zeros(5, 4), torch.randn(5, 4))
        """, "GT758", holds="delta.shape == (5, 4)"), Shape("""
        def train_step(model, opt, x, y):
            logits = model(x)
            loss = F.nll_loss(F.softmax(logits, dim=1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
        first = train_step(net, opt, x, y).item()
        """, "GT758", line=3, holds="first < 0")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def _codes(src: str, code: str) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in check_source(textwrap.dedent(src), "t.py", select=[code])]


# moshi (moshi_mlx/models/lm.py): `import mlx.nn as nn`, `class Lm(nn.Module)` keeps its
# embeddings in a plain list: MLX's `Module` is a dict whose `parameters()` walks lists and
# dicts, so they are registered (mlx is not installed here: checked only). Twin: the same
# class over torch's `nn.Module`, where the list's layers are missing from `parameters()`
MLX = """
import mlx.nn as nn

class Lm(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.out = nn.Linear(d, d)
        self.embs = [nn.Embedding(10, d) for _ in range(n)]

    def __call__(self, xs):
        return self.out(sum(e(x) for e, x in zip(self.embs, xs)))
"""


def test_another_frameworks_module_keeps_a_list() -> None:
    assert _codes(MLX, "GT401") == []
    twin = MLX.replace("import mlx.nn as nn", "import torch.nn as nn").replace(
        "def __call__", "def forward")
    assert _codes(twin, "GT401") == [(8, "GT401")]
    env: dict = {}
    exec(compile(textwrap.dedent(twin), "t.py", "exec"), env)
    assert len(list(env["Lm"](2, 4).parameters())) == 2  # the Linear's weight and bias only
