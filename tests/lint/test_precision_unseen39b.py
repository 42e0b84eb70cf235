"""Shapes that fired wrongly on the projects of docs/triage/unseen39b.md (session 39), each in
another spelling than the project's and next to a buggy twin that is still reported. The
GT518 pair runs on real torch; the `.cuda()` pairs are judged by the checker alone (this
machine has no CUDA device: the fact is `Tensor.cuda()`'s documented no-op, NOTE [cuda of what
is on cuda])."""
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
from torch.autograd import Variable
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # wenzhu23333/Differential-Privacy-Based-Federated-Learning (`models/Update.py`): per
    # micro-batch `net.zero_grad()`, backward, clip, the gradients added into `total_grads`;
    # after the loop `param.grad = total_grads[i]`, then `optimizer.step()`: the step applies
    # the written sum, not the last pass's gradient. Twin: the sums are made but never written
    # back: the step applies the last micro-batch's gradient alone
    "gradients-written-back-after-a-clearing-loop": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(3)]
        for epoch in range(2):
            total = [torch.zeros_like(p) for p in net.parameters()]
            for x, y in batches:
                net.zero_grad()
                F.mse_loss(net(x), y).backward()
                for i, p in enumerate(net.parameters()):
                    total[i] += p.grad.detach().clone() / len(batches)
            for p, g in zip(net.parameters(), total):
                p.grad = g
            opt.step()
        """, "GT518"), Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(3)]
        for epoch in range(1):
            total = [torch.zeros_like(p) for p in net.parameters()]
            for x, y in batches:
                net.zero_grad()
                F.mse_loss(net(x), y).backward()
                for i, p in enumerate(net.parameters()):
                    total[i] += p.grad.detach().clone() / len(batches)
            before = net.weight.detach().clone()
            last = net.weight.grad.detach().clone()
            opt.step()
        """, "GT518", line=13,
        holds="torch.allclose(net.weight, before - 0.1 * last) and "
              "not torch.allclose(net.weight, before - 0.1 * total[0])")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_last_gradient_rewritten_after_the_loop_is_still_reported() -> None:
    """Twin: what is written back after the loop is the last pass's own gradient, clamped:
    the step still applies the last batch's gradient alone."""
    twin = Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(3)]
        for epoch in range(1):
            for x, y in batches:
                net.zero_grad()
                F.mse_loss(net(x), y).backward()
            for p in net.parameters():
                p.grad = p.grad.clamp(-100.0, 100.0)
            before = net.weight.detach().clone()
            last = net.weight.grad.detach().clone()
            opt.step()
        """, "GT518", line=12, holds="torch.allclose(net.weight, before - 0.1 * last)")
    judge(PRELUDE, twin)


def _lines(src: str, code: str) -> list[int]:
    source = PRELUDE + textwrap.dedent(src).lstrip("\n")
    offset = PRELUDE.count("\n")
    return sorted(f.line - offset for f in check_source(source, "shape.py", select=[code]))


# jfc43/informative-outlier-mining (`tune_mahalanobis_hyperparams.py`, Lee et al.'s Mahalanobis
# detector): the batch goes to the GPU (`data = data.cuda()`), is wrapped (`data, target =
# Variable(data, volatile=True), ...`), then `inputs = Variable(data.data,
# requires_grad=True).cuda()`: `.cuda()` of a tensor on the current device returns it itself,
# the leaf, and `inputs.grad` is filled
CUDA_FIRST = """
    def perturbed(model, batches, eps):
        out = []
        for images, labels in batches:
            data = torch.as_tensor(images)
            data = data.cuda()
            data, target = Variable(data), Variable(labels.cuda())
            model.zero_grad()
            inputs = Variable(data.data, requires_grad=True).cuda()
            loss = F.cross_entropy(model(inputs), target)
            loss.backward()
            out.append(inputs.data - eps * torch.sign(inputs.grad.data))
        return out
    """


def test_leaf_moved_to_the_device_it_is_on_is_silent() -> None:
    assert _lines(CUDA_FIRST, "GT305") == []
    assert _lines(CUDA_FIRST, "GT307") == []


def test_leaf_moved_from_the_cpu_is_reported() -> None:
    """Twin: the batch reaches the GPU only in one `if` arm: on the CPU path `.cuda()` copies
    the leaf, `inputs` is a non-leaf and `inputs.grad` stays None."""
    twin = CUDA_FIRST.replace(
        "            data = data.cuda()\n",
        "            if torch.cuda.device_count() > 1:\n"
        "                data = data.cuda()\n")
    assert _lines(twin, "GT305") == [9]


def test_leaf_of_a_cpu_batch_is_reported() -> None:
    """Twin: no move before the leaf is made: `.cuda()` copies the CPU leaf."""
    twin = CUDA_FIRST.replace("            data = data.cuda()\n", "")
    assert _lines(twin, "GT305") == [7]
