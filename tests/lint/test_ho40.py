"""The static fact widened for held-out batch 40 (docs/triage/ho40.md): a name met twice in one
walk of the loss's sources (NOTE [binding met twice]) keeps its sources the second time, so
``loss = loss + kd`` whose ``kd`` reads the ``preds`` that ``loss`` already followed is still
a live op saving an inference tensor (GT204). Buggy twins reported on the ``with`` line and
silent look-alikes, in other spellings than the case's; every snippet runs on real torch and
``raises`` / ``holds`` check what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
student, teacher = nn.Linear(4, 3), nn.Linear(4, 3).requires_grad_(False)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
'''

_TRAIN = """
        def train(batches):
            for x, y in batches:
                logits = student(x)
                loss = F.cross_entropy(logits, y)
                with {mode}:
                    target = F.softmax(teacher(x) / 2.0, dim=1)
                {term}
                opt.zero_grad()
                loss.backward()
                opt.step()
        batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(2)]
        """

_KL = "loss = loss + F.kl_div(F.log_softmax(logits, dim=1), target, reduction='batchmean')"
_MSE = "loss = loss + 0.5 * F.mse_loss(logits.softmax(dim=1), target)"

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT204: the distillation term reads `logits`, which `loss` (on the right-hand side)
    # already followed: the term is still a live op saving the inference tensor. The
    # look-alike makes the soft targets under no_grad
    "kl-term-added-to-the-loss": (Shape(
        _TRAIN.replace("{mode}", "torch.inference_mode()").replace("{term}", _KL)
        + "train(batches)\n", "GT204", line=5,
        raises=(RuntimeError, "Inference tensors cannot be saved for backward")), Shape(
        _TRAIN.replace("{mode}", "torch.no_grad()").replace("{term}", _KL)
        + "train(batches)\n", "GT204", holds="student.weight.grad is not None")),
    # GT204: the same through a product and a loss of another kind; the look-alike clones
    # the targets outside inference mode (a normal tensor)
    "mse-term-scaled": (Shape(
        _TRAIN.replace("{mode}", "torch.inference_mode()").replace("{term}", _MSE)
        + "train(batches)\n", "GT204", line=5,
        raises=(RuntimeError, "Inference tensors cannot be saved for backward")), Shape(
        _TRAIN.replace("{mode}", "torch.inference_mode()").replace(
            "{term}", "target = target.clone()\n                " + _MSE)
        + "train(batches)\n", "GT204", holds="student.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
