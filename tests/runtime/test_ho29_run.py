"""`gradtrace run` on held-out batch 29's in-place write into a tensor that does not require grad
but was saved for backward by a product with one that does (docs/triage/ho29.md, NOTE [write
into a tensor without grad]): the error names no op, and the diagnosis names the write, not the
op that saved it. Without the bug (the write out of place) the run is clean. Real torch,
in-process."""
from __future__ import annotations

SMOOTHED = """\
import torch
import torch.nn as nn


class SmoothedLoss(nn.Module):
    def __init__(self, eps=0.1):
        super().__init__()
        self.eps = eps
        self.onehot = None

    def forward(self, logits, target):
        probs = logits.softmax(-1)
        self.onehot = torch.zeros_like(logits)
        self.onehot[torch.arange(len(target)), target] = 1.0
        weights = 1 - probs * self.onehot  # S
        self.onehot.mul_(1 - self.eps)  # W
        return -(self.onehot * logits.log_softmax(-1) * weights).sum(-1).mean()


torch.manual_seed(0)
net = nn.Linear(6, 4)
loss = SmoothedLoss()(net(torch.randn(5, 6)), torch.tensor([0, 1, 2, 3, 0]))
loss.backward()
"""


def _line_of(src: str, mark: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(mark))


def _run(tmp_path, src: str) -> tuple[list, bool]:
    import runpy

    import gradtrace

    path = tmp_path / "smoothed.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace()
    try:
        with tr:
            runpy.run_path(str(path))
    except RuntimeError as exc:
        return list(tr.diagnose(exc)), True
    return list(tr.findings), False


def test_write_into_saved_tensor_without_grad_is_named(tmp_path):
    found, crashed = _run(tmp_path, SMOOTHED)
    assert crashed
    assert found and (found[0].code, found[0].line) == ("GT602", _line_of(SMOOTHED, "# W")), found
    assert any(r.line == _line_of(SMOOTHED, "# S") for r in found[0].related), found


def test_write_out_of_place_is_clean(tmp_path):
    src = SMOOTHED.replace("self.onehot.mul_(1 - self.eps)  # W",
                           "self.onehot = self.onehot * (1 - self.eps)  # W")
    assert src != SMOOTHED
    found, crashed = _run(tmp_path, src)
    assert not crashed and [f for f in found if f.code == "GT602"] == [], found


SHARED = """\
import torch
import torch.nn as nn


class Affine(nn.Module):
    def __init__(self, n):
        super().__init__()
        init = torch.zeros(1, n)
        self.scale = nn.Parameter(init)
        self.shift = nn.Parameter(init)  # C

    def forward(self, x):
        return x * torch.exp(self.scale) + self.shift


torch.manual_seed(0)
m = Affine(2)
opt = torch.optim.Adam(m.parameters(), lr=1e-2)
for _ in range(3):
    opt.zero_grad()
    (m(torch.randn(8, 2)) - 1.0).pow(2).mean().backward()
    opt.step()
"""


def test_parameters_made_from_one_tensor_lead_with_the_second_wrap(tmp_path):
    # the run's aliased-parameters symptom (GT872, at the optimizer) is explained by the static
    # GT543 on the line that wrapped the tensor a second time (NOTE [parameters over one tensor])
    found, crashed = _run(tmp_path, SHARED)
    assert not crashed and found, found
    assert (found[0].code, found[0].line) == ("GT543", _line_of(SHARED, "# C")), found
    assert found[0].source == "static+runtime", found


def test_parameters_with_own_tensors_are_clean(tmp_path):
    src = SHARED.replace("nn.Parameter(init)  # C", "nn.Parameter(init.clone())  # C")
    assert src != SHARED
    found, crashed = _run(tmp_path, src)
    assert not crashed and [f for f in found if f.code in ("GT543", "GT872")] == [], found
