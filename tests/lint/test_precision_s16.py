"""Shapes that fired wrongly on the projects of docs/triage/unseen16.md (session 16), each in
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
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # graph-generation (data.py): `np.fill_diagonal(adj_raw, 0)` with `np` from a star
    # import: NumPy's fill_diagonal works in place and returns None, and torch has no
    # out-of-place `fill_diagonal` at all. Here the module is bound by `__import__`. Twin: a
    # method only tensors have (`index_fill`) on a value of unknown source: dropped
    "numpy-fill-diagonal-through-an-unresolved-module-name": (Shape("""
        linalg = __import__("numpy")
        adj = linalg.ones((3, 3))
        linalg.fill_diagonal(adj, 0.0)
        t = torch.tensor(adj)
        cleared = float(adj.trace()) == 0.0
        """, "GT708", holds="cleared"), Shape("""
        def load():
            return torch.ones(3, 3)
        adj = load()
        adj.index_fill(0, torch.tensor([0]), 0.0)
        unchanged = bool((adj == 1).all())
        """, "GT708", line=4, holds="unchanged")),
    # rasbt's fc-to-conv notebook: `torch.relu(fc(inputs.view(-1, 4)))` as a cell's last
    # line, which displays it: the operand is a fresh value nobody holds, so no update of it
    # can be meant. Here a sigmoid of a sum. Twin: the operand is a view of a gradient,
    # which the in-place op would have clipped
    "op-on-a-fresh-value-dropped": (Shape("""
        head = nn.Linear(4, 2)
        feats = torch.randn(3, 4)
        torch.sigmoid(head(feats) + 1.0)
        out = head(feats)
        """, "GT708", holds="out.shape == (3, 2)"), Shape("""
        w = nn.Parameter(torch.randn(4, 4))
        (w * 10).sum().backward()
        torch.clamp(w.grad.view(-1), -1.0, 1.0)
        unclipped = bool(w.grad.abs().max() > 1.0)
        """, "GT708", line=3, holds="unclipped")),
    # improved-wgan-pytorch (congan_train.py): the generator steps, then the critic's passes
    # backward a loss read from `fake_data = aG(noisev).detach()`, bound in its own
    # statement: that loss does not reach the generator, whose step needs nothing from it.
    # Here the critic returns a pair, and the detach follows a `.view`. Twin: the bound
    # value keeps its history (`.relu()`), the auxiliary loss after the step reaches the
    # generator and its gradient is erased by the next pass's `zero_grad()`: it trains nothing
    "critic-loss-read-from-a-detached-binding-after-the-generator-step": (Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 3)
            def forward(self, x):
                h = self.body(x)
                return h[:, :1], h[:, 1:]
        gen, critic = nn.Linear(4, 4), Critic()
        opt_gen = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_critic = torch.optim.SGD(critic.parameters(), lr=0.1)
        def fit(steps):
            for _ in range(steps):
                for _ in range(2):
                    gen.zero_grad()
                    z = torch.randn(8, 4)
                    score, _ = critic(gen(z))
                    g_loss = -score.mean()
                    g_loss.backward()
                opt_gen.step()
                for _ in range(3):
                    critic.zero_grad()
                    z, real = torch.randn(8, 4), torch.randn(8, 4)
                    fake = gen(z).view(8, 4).detach()
                    score_fake, _ = critic(fake)
                    score_real, _ = critic(real)
                    c_loss = score_fake.mean() - score_real.mean()
                    c_loss.backward()
                    opt_critic.step()
        w0 = gen.weight.detach().clone()
        fit(3)
        moved = not torch.equal(w0, gen.weight)
        """, "GT522", holds="moved"), Shape("""
        finals = []
        for weight in (1.0, 0.0):
            torch.manual_seed(0)
            gen, critic = nn.Linear(4, 4), nn.Linear(4, 1)
            opt_gen = torch.optim.SGD(gen.parameters(), lr=0.1)
            for _ in range(3):
                z = torch.randn(8, 4)
                gen.zero_grad()
                g_loss = F.mse_loss(gen(z), z)
                g_loss.backward()
                opt_gen.step()
                h = gen(z).relu()
                aux = weight * critic(h).mean()
                aux.backward()
            finals.append(gen.weight.detach().clone())
        trains_nothing = torch.equal(finals[0], finals[1])
        """, "GT522", line=11, holds="trains_nothing")),
    # FNO (scripts/train_burgers_pino.py): the plateau is built under `if cfg == "plateau"`,
    # and stepped under `if isinstance(scheduler, ReduceLROnPlateau): step(metric)`, `else:
    # step()`: the bare step never meets the plateau. Here the test is `not isinstance`, on the
    # class imported by name. Twin: the test names another class, so the plateau reaches the
    # bare step and torch raises
    "bare-step-in-the-branch-where-the-scheduler-is-not-a-plateau": (Shape("""
        from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR
        def fit(kind):
            net = nn.Linear(2, 1)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            if kind == "plateau":
                sched = ReduceLROnPlateau(opt, patience=0)
            else:
                sched = StepLR(opt, step_size=1)
            for _ in range(2):
                loss = net(torch.randn(4, 2)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if not isinstance(sched, ReduceLROnPlateau):
                    sched.step()
                else:
                    sched.step(loss.item())
            return opt.param_groups[0]["lr"]
        rates = (fit("plateau"), fit("step"))
        """, "GT531", holds="rates[1] < 0.1"), Shape("""
        from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR
        def fit(kind):
            net = nn.Linear(2, 1)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            if kind == "plateau":
                sched = ReduceLROnPlateau(opt, patience=0)
            else:
                sched = StepLR(opt, step_size=1)
            for _ in range(2):
                loss = net(torch.randn(4, 2)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if isinstance(sched, StepLR):
                    sched.step(loss.item())
                else:
                    sched.step()
            return opt.param_groups[0]["lr"]
        rates = (fit("plateau"), fit("step"))
        """, "GT531", line=17, raises=(TypeError, "metrics"))),
    # FNO (scripts/train_uqno_darcy.py): `out, sample = data_processor.postprocess(out,
    # sample)` in an evaluation loop with grad on, then `x_list.append(sample["x"])`: the
    # processor hands each argument back, and `sample` came from the loader. Here a scaler
    # object's `undo(pred, batch)`. Twin: the element collected is the one whose argument is
    # the model's output: each step's graph stays alive
    "collecting-the-data-element-a-processor-hands-back": (Shape("""
        class Scaler:
            def undo(self, pred, batch):
                return pred * 2.0, {k: v * 2.0 for k, v in batch.items()}
        def collect(net, loader, scaler):
            kept = []
            for batch in loader:
                pred = net(batch["x"])
                pred, batch = scaler.undo(pred, batch)
                kept.append(batch["x"])
            return kept
        kept = collect(nn.Linear(3, 1), [{"x": torch.randn(2, 3)} for _ in range(3)], Scaler())
        """, "GT505", holds="not any(t.requires_grad for t in kept)"), Shape("""
        class Scaler:
            def undo(self, pred, batch):
                return pred * 2.0, {k: v * 2.0 for k, v in batch.items()}
        def collect(net, loader, scaler):
            kept = []
            for batch in loader:
                pred = net(batch["x"])
                pred, batch = scaler.undo(pred, batch)
                kept.append(pred)
            return kept
        kept = collect(nn.Linear(3, 1), [{"x": torch.randn(2, 3)} for _ in range(3)], Scaler())
        """, "GT505", line=9, holds="all(t.requires_grad for t in kept)")),
    # code-of-learn-deep-learning (fine-tune notebook): a first experiment sets `net.fc` up to
    # train; then `net = models.resnet50(...)` anew, every parameter of the new net frozen, a
    # new `net.fc`: the freeze never reaches the first head. Here a backbone class of the file
    # and `requires_grad_(False)`. Twin: the name is rebound by `.to()`, which returns the same
    # module: the head is frozen with the rest and backward raises
    "freeze-of-a-model-bound-anew-after-the-head-of-the-old-one": (Shape("""
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(torch.relu(self.body(x)))
        def fit(net, params):
            opt = torch.optim.SGD(params, lr=0.1)
            loss = net(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        def experiments():
            enc = Backbone()
            enc.head = nn.Linear(4, 2)
            fit(enc, enc.parameters())
            enc = Backbone()
            enc.requires_grad_(False)
            enc.head = nn.Linear(4, 2)
            w0 = enc.head.weight.detach().clone()
            fit(enc, enc.head.parameters())
            return not torch.equal(w0, enc.head.weight)
        moved = experiments()
        """, "GT408", holds="moved"), Shape("""
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(torch.relu(self.body(x)))
        def fit(net, params):
            opt = torch.optim.SGD(params, lr=0.1)
            loss = net(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        def experiments():
            enc = Backbone()
            enc.head = nn.Linear(4, 2)
            enc = enc.to("cpu")
            enc.requires_grad_(False)
            fit(enc, enc.head.parameters())
        experiments()
        """, "GT408", line=18, raises=(RuntimeError, "does not require grad"))),
    # rasbt's cnn-vgg16-cats-dogs: `compute_accuracy_and_loss` returns `correct.float() / n *
    # 100, cross_entropy / n`, the accuracy first, the cross-entropy (summed with `.item()`)
    # second: the first element is a metric, not a loss. Here `accuracy_and_nll_loss` over a
    # model returning (logits, log-probabilities), summing `nll_loss`. Twin: a loss function
    # whose first element is itself a loss built from argmax indices (its other element, from a
    # loss call too): backward raises
    "accuracy-returned-before-the-loss": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
            def forward(self, x):
                logits = self.fc(x)
                return logits, F.log_softmax(logits, dim=1)
        def accuracy_and_nll_loss(net, batches):
            hits, total = 0, 0
            nll = 0.
            for i, (x, y) in enumerate(batches):
                logits, logp = net(x)
                nll += F.nll_loss(logp, y, reduction="sum").item()
                _, pred = torch.max(logp, 1)
                total += y.size(0)
                hits += (pred == y).sum()
            return hits.float() / total * 100, nll / total
        net = Net()
        with torch.no_grad():
            acc, nll = accuracy_and_nll_loss(net, [(torch.randn(5, 4), torch.randint(0, 3, (5,)))])
        ok = 0.0 <= float(acc) <= 100.0 and isinstance(nll, float)
        """, "GT108", holds="ok"), Shape("""
        def hard_loss(net, x, y):
            pred = net(x).argmax(dim=1)
            return F.mse_loss(pred.float(), y.float()), F.cross_entropy(net(x), y).detach()
        net = nn.Linear(4, 3)
        loss, ce = hard_loss(net, torch.randn(5, 4), torch.randint(0, 3, (5,)))
        loss.backward()
        """, "GT108", line=2, raises=(RuntimeError, "does not require grad"))),
    # Atcold's autograd notebook: `with torch.no_grad(): z = w @ x`, then `try: z.backward()
    # except RuntimeError as e: print(e)`: the notebook shows the error on purpose. Here a
    # product and `except Exception`, the error kept in a list. Twin: the handler lets every
    # error but an out-of-memory one out again, so the no-grad loss still raises
    "backward-expected-to-fail-in-a-try": (Shape("""
        w = torch.ones(3, requires_grad=True)
        x = torch.arange(1.0, 4.0)
        shown = []
        with torch.no_grad():
            y = (w * x).sum()
        try:
            y.backward()
        except Exception as err:
            shown.append(type(err).__name__)
        """, "GT201", holds="shown == ['RuntimeError']"), Shape("""
        net = nn.Linear(3, 1)
        with torch.no_grad():
            out = net(torch.randn(2, 3)).sum()
        try:
            out.backward()
        except RuntimeError as err:
            if "out of memory" not in str(err):
                raise
        """, "GT201", line=2, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_a_catch_all_around_the_whole_loop_is_no_probe_of_its_backward() -> None:
    """Twin of `backward-expected-to-fail-in-a-try` in another shape: the `try` holds the whole
    training loop, its handler prints the error: the no-grad loss still breaks the training."""
    judge(PRELUDE, Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        failed = []
        try:
            for _ in range(2):
                with torch.no_grad():
                    out = net(torch.randn(2, 3)).sum()
                opt.zero_grad()
                out.backward()
                opt.step()
        except Exception as err:
            failed.append(str(err))
        """, "GT201", line=6, holds="failed and 'does not require grad' in failed[0]"))
