"""Shapes that fired wrongly on the projects of docs/triage/unseen22.md (session 22), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch (the TensorFlow of the GT505 pair is a stand-in module: TensorFlow
is not installed here, and the checker only reads the import)."""
from __future__ import annotations

import textwrap

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

# a stand-in for TensorFlow 1's graph mode: a "model" builds a symbolic op, a session runs
# ops and hands back NumPy values (as `tf.Session.run` does)
FAKE_TF = '''
import sys, types
import numpy as np
class _Op:
    def __init__(self, fn): self.fn = fn
class _Dense:
    def __init__(self, n): self.w = np.ones((3, n), np.float32)
    def __call__(self, x): return _Op(lambda feed: (feed[x] @ self.w).mean())
class _Session:
    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def run(self, ops, feed_dict=None): return [None if o is None else o.fn(feed_dict) for o in ops]
_tf = types.ModuleType("tensorflow")
_tf.Session, _tf.placeholder = _Session, lambda *shape: object()
_tf.layers = types.SimpleNamespace(Dense=_Dense)
sys.modules["tensorflow"] = _tf
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # relora (torchrun_main.py): the loss is divided by `args.gradient_accumulation`, an `if
    # global_step % args.gradient_accumulation == 0: update_step += 1` counts updates in a
    # skipped-batches branch, and the pass ends with `if ... % ... != 0: continue` before
    # the step: only every N-th pass reaches it. Here other names. Twin: no `continue`
    "step-after-a-continue-on-the-off-passes": (Shape("""
        def train(batches, accum, skip):
            model = nn.Linear(3, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            n_updates = 0
            for it, x in enumerate(batches, 1):
                if n_updates in skip:
                    if it % accum == 0:
                        n_updates += 1
                    continue
                (model(x).pow(2).mean() / accum).backward()
                if it % accum != 0:
                    continue
                opt.step()
                opt.zero_grad()
                n_updates += 1
            return n_updates
        n = train([torch.randn(4, 3) for _ in range(8)], 4, set())
        """, "GT519", holds="n == 2"), Shape("""
        def train(batches, accum, skip):
            model = nn.Linear(3, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            n_updates = 0
            for it, x in enumerate(batches, 1):
                if n_updates in skip:
                    if it % accum == 0:
                        n_updates += 1
                    continue
                (model(x).pow(2).mean() / accum).backward()
                opt.step()
                opt.zero_grad()
                n_updates += 1
            return n_updates
        n = train([torch.randn(4, 3) for _ in range(8)], 4, set())
        """, "GT519", line=11, holds="n == 8")),
    # SimCLR-CIFAR10 (simclr_lin.py): `run_epoch(model, loader, epoch, optimizer=None)` clears,
    # backwards and steps only `if optimizer:`; the test pass calls it without one: it steps
    # nothing. Twin: the step sits outside the flag, the clear under it, and the loop never
    # passes it: with lr 0 the gradient ends as the sum over every pass
    "epoch-function-trains-only-given-an-optimizer": (Shape("""
        def run_epoch(net, batches, opt=None):
            total = 0.0
            for x in batches:
                loss = net(x).pow(2).mean()
                if opt:
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                total += loss.item()
            return total / len(batches)
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [torch.randn(4, 3) for _ in range(3)]
        for epoch in range(2):
            run_epoch(net, batches, opt)
            before = net.weight.detach().clone()
            val = run_epoch(net, batches)
        """, "GT517", holds="torch.equal(before, net.weight) and val >= 0"), Shape("""
        def run_epoch(net, batches, opt, clear=None):
            for x in batches:
                if clear:
                    opt.zero_grad()
                net(x).pow(2).mean().backward()
                opt.step()
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.0)
        batches = [torch.randn(4, 3) for _ in range(3)]
        for epoch in range(2):
            run_epoch(net, batches, opt)
        total = sum(torch.autograd.grad(net(x).pow(2).mean(), net.weight)[0] for x in batches)
        """, "GT517", line=11, holds="torch.allclose(net.weight.grad, 2 * total)")),
}

# t2g-former (run_tf_tabnet.py): a TensorFlow TabNet trained by `sess.run([train_op,
# train_loss_op])` under `with tf.Session() as sess`, batches drawn from a torch DataLoader of
# indices, the loss fed to an average meter: NumPy values, no torch graph. Here a dense
# "model", a list. Twin: the same loop also collects a torch model's loss with grad on
TF_SHAPES: dict[str, tuple[Shape, Shape]] = {
    "session-run-values-collected-in-an-index-loop": (Shape(FAKE_TF + textwrap.dedent("""
        import tensorflow as tf
        x_ph = tf.placeholder(None, 3)
        model = tf.layers.Dense(1)
        loss_op = model(x_ph)
        X = np.random.rand(8, 3).astype(np.float32)
        idx_loader = torch.utils.data.DataLoader(torch.arange(8), batch_size=4)
        losses = []
        with tf.Session() as sess:
            for idx in idx_loader:
                _, batch_loss = sess.run([None, loss_op], feed_dict={x_ph: X[idx.numpy()]})
                losses.append(batch_loss)
        """), "GT505", holds="len(losses) == 2 and isinstance(losses[0], np.floating)"),
        Shape(FAKE_TF + textwrap.dedent("""
        import tensorflow as tf
        x_ph = tf.placeholder(None, 3)
        model = tf.layers.Dense(1)
        loss_op = model(x_ph)
        X = np.random.rand(8, 3).astype(np.float32)
        idx_loader = torch.utils.data.DataLoader(torch.arange(8), batch_size=4)
        head = nn.Linear(3, 1)
        losses = []
        with tf.Session() as sess:
            for idx in idx_loader:
                _, batch_loss = sess.run([None, loss_op], feed_dict={x_ph: X[idx.numpy()]})
                losses.append(head(torch.from_numpy(X[idx.numpy()])).mean())
        """), "GT505", line=28, holds="losses[0].grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


@pytest.mark.parametrize("name", sorted(TF_SHAPES))
def test_other_framework_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, TF_SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(TF_SHAPES))
def test_other_framework_twin_is_reported(name: str) -> None:
    judge(PRELUDE, TF_SHAPES[name][1])
