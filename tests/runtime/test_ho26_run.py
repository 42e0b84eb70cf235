"""`gradtrace run` on held-out batch 26's two silent graph cuts that a run alone does not rank
first (docs/triage/ho26.md). A layer's weight read through `.data` on one path while the layer
also runs live still gets a gradient, so the run must not refute the static GT105 (NOTE [layer
parameter read through data]); a merged kernel made a Parameter of the layer it then runs
(NOTE [parameter made mid-forward]) is the static GT119 that explains the run's graph-cut
symptom: the run's first finding names its line. Each without its bug runs without the finding. Real torch, in-process."""
from __future__ import annotations

QUERY = """\
import torch
import torch.nn as nn


class Attend(nn.Module):
    def __init__(self):
        super().__init__()
        self.proto = nn.Linear(4, 3)

    def forward(self, x, label):
        q = self.proto.weight.data[label]  # C
        score = (x * q).sum(-1).softmax(0)
        return self.proto((score.unsqueeze(-1) * x).sum(0, keepdim=True))


torch.manual_seed(0)
m = Attend()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    m(torch.randn(5, 4), torch.tensor(1)).sum().backward()
    opt.step()
"""

MERGED = """\
import torch
import torch.nn as nn


class Mixer:
    def mix(self, conv, alphas, x):
        original = conv.weight
        parts = [conv.weight * alphas[0]]
        parts.append(conv.weight.flip(-1) * alphas[1])
        merged = sum(parts)
        conv.weight = nn.Parameter(merged)  # C
        out = conv(x)
        conv.weight = original
        return out


torch.manual_seed(0)
conv = nn.Conv1d(2, 2, 3, padding=1)
alphas = nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([*conv.parameters(), alphas], lr=0.1)
x = torch.randn(1, 2, 5)
for _ in range(3):
    opt.zero_grad()
    loss = (Mixer().mix(conv, alphas, x) + x * alphas.softmax(0)[0]).pow(2).mean()
    loss.backward()
    opt.step()
"""


def _findings(tmp_path, src: str) -> list:
    import runpy

    import gradtrace

    path = tmp_path / "case.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace()
    with tr:
        runpy.run_path(str(path))
    return list(tr.findings)


def _marked(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


def test_weight_read_through_data_on_one_path_is_kept(tmp_path):
    found = _findings(tmp_path, QUERY)
    assert found and (found[0].code, found[0].line) == ("GT105", _marked(QUERY)), found


def test_weight_read_live_is_clean(tmp_path):
    found = _findings(tmp_path, QUERY.replace("self.proto.weight.data[label]",
                                              "self.proto.weight[label]"))
    assert [f for f in found if f.code == "GT105"] == [], found


def test_parameter_made_mid_forward_leads(tmp_path):
    found = _findings(tmp_path, MERGED)
    assert found and found[0].line == _marked(MERGED), found
    assert found[0].code in ("GT119", "GT107") and found[0].source == "static+runtime", found


def test_merged_kernel_run_functionally_is_clean(tmp_path):
    src = MERGED.replace("        conv.weight = nn.Parameter(merged)  # C\n        out = conv(x)",
                         "        out = torch.nn.functional.conv1d(x, merged, conv.bias, padding=1)")
    assert src != MERGED
    found = _findings(tmp_path, src)
    assert [f for f in found if f.code in ("GT119", "GT107", "GT820")] == [], found


ACCUMULATED = """\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if i == 0:
                total = x  # A
            else:
                total += x  # W
        return total


torch.manual_seed(0)
Stack()(torch.randn(3, 4)).sum().backward()
"""


def _crash(tmp_path, src: str) -> list:
    import runpy

    import gradtrace

    path = tmp_path / "acc.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace()
    try:
        with tr:
            runpy.run_path(str(path))
    except RuntimeError as exc:
        return list(tr.diagnose(exc))
    raise AssertionError("the in-place sum did not raise")


def _line_of(src: str, mark: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith(mark))


def test_sum_started_from_a_callee_result_names_the_write(tmp_path):
    # NOTE [whole-tensor write through an alias]: the callee made the tensor for the function
    found = _crash(tmp_path, ACCUMULATED)
    assert found and (found[0].code, found[0].line) == ("GT602", _line_of(ACCUMULATED, "# W"))

